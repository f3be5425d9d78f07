/**
 * The package as users get it: built into dist/, imported by its name by the sample app,
 * and required from CommonJS. One file, so dist/ is built once, by one worker.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, execSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startApp, type RunningApp } from '../../demo/app.js';
import { redisUrl } from '../harness/redis.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

beforeAll(() => {
  execSync('npm run build --silent && npx tsc -p sample-app/tsconfig.json', {
    cwd: ROOT,
    stdio: 'pipe',
  });
}, 120_000);

describe('two sample-app processes on one Redis', () => {
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    const main = `${ROOT}dist-sample/sample-app/main.js`;
    for (let i = 0; i < 2; i++) apps.push(await startApp({ main, env: { REDIS_URL: redisUrl() } }));
  }, 60_000);

  afterAll(() => Promise.all(apps.map((app) => app.stop())));

  it('share one budget: driven alternately, together they admit exactly the quota (login, 5/m per IP)', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await fetch(`${apps[i % 2]!.url}/auth/login`, { method: 'POST' });
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    // Admitted logins fail authentication (401): what matters is that they were let through.
    expect(statuses.filter((s) => s !== 429)).toHaveLength(5);
    expect(statuses.slice(5)).toEqual([429, 429, 429, 429, 429, 429, 429]);
    // Both instances admitted, and both refused: one budget, not one per process.
    const byApp = [0, 1].map((k) => statuses.filter((s, i) => i % 2 === k && s !== 429).length);
    expect(byApp).toEqual([3, 2]);
  });
});

// A CommonJS app (the Nest 10 and 11 default) and its Jest tests, whose module runtime has no
// require(esm), load the CommonJS build; an ES module app loads the ESM entry, which re-exports
// that same build. The scripts resolve 'nest-rate-limit' through package.json `exports`, by
// name (self-reference), exactly as an app's `node_modules` copy would.
function run(script: string, ...flags: string[]): unknown {
  const stdout = execFileSync(process.execPath, [...flags, '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

describe('the built package under require() and import', () => {
  it('require() loads the CommonJS build and limits', () => {
    const script = `
      const m = require('nest-rate-limit');
      const limiter = new m.RateLimiter({ store: new m.MemoryStore({ sweepIntervalMs: 0 }) });
      (async () => {
        const out = [];
        for (let i = 0; i < 3; i++) out.push((await limiter.consume('u', { rate: '2/m' })).allowed);
        const file = require.resolve('nest-rate-limit').slice(${JSON.stringify(ROOT)}.length);
        console.log(JSON.stringify({ file, module: typeof m.RateLimitModule, out }));
      })();
    `;
    // Our CommonJS build needs no require(esm); NestJS 12 itself is ESM-only, so with its
    // peers installed Node's require(esm) still loads @nestjs/common. Jest without
    // require(esm), on NestJS 10 and 11, is proven by the projects in test/consumers.
    expect(run(script, '--input-type=commonjs')).toEqual({
      file: 'dist/cjs/index.js',
      module: 'function',
      out: [true, true, false],
    });
  });

  it('import and require() in one process share one copy of every class and token', () => {
    const script = `
      import { createRequire } from 'node:module';
      const esm = await import('nest-rate-limit');
      const cjs = createRequire(process.cwd() + '/')('nest-rate-limit');
      const names = (m) => Object.keys(m).filter((k) => k !== 'default' && k !== '__esModule').sort();
      console.log(JSON.stringify({
        sameNames: JSON.stringify(names(esm)) === JSON.stringify(names(cjs)),
        count: names(esm).length,
        shared: names(cjs).filter((k) => esm[k] === cjs[k]).length,
        resolved: import.meta.resolve('nest-rate-limit').slice(import.meta.resolve('nest-rate-limit').indexOf('/dist/')),
      }));
    `;
    const result = run(script, '--input-type=module') as Record<string, unknown>;
    expect(result).toEqual({
      sameNames: true,
      count: result.count,
      shared: result.count,
      resolved: '/dist/esm/index.js',
    });
    // Every value the API report lists (api/), and nothing it does not: a class, function or
    // const exported in one build only, or missing from the report, shows here.
    const report = readFileSync(join(ROOT, 'api', 'nest-rate-limit.api.md'), 'utf8');
    expect(result.count).toBe(
      report.match(/^export (abstract )?(class|function|const|enum) /gm)?.length,
    );
  });

  it('nest-rate-limit/throttler: import and require() share one copy of every class and token, and the drop-in counts', () => {
    const script = `
      import { createRequire } from 'node:module';
      const esm = await import('nest-rate-limit/throttler');
      const cjs = createRequire(process.cwd() + '/')('nest-rate-limit/throttler');
      const names = (m) => Object.keys(m).filter((k) => k !== 'default' && k !== '__esModule').sort();
      const storage = new cjs.ThrottlerStorageService();
      const hits = [];
      for (let i = 0; i < 3; i++) hits.push((await storage.increment('k', 60000, 2, 0, 'default')).isBlocked);
      await storage.onApplicationShutdown();
      console.log(JSON.stringify({
        shared: names(cjs).filter((k) => esm[k] === cjs[k]).length === names(esm).length,
        guard: typeof esm.ThrottlerGuard,
        hits,
        resolved: import.meta.resolve('nest-rate-limit/throttler').replace(/^.*\\/dist\\//, '/dist/'),
      }));
    `;
    expect(run(script, '--input-type=module')).toEqual({
      shared: true,
      guard: 'function',
      hits: [false, false, true],
      resolved: '/dist/esm/throttler/index.js',
    });
  });
});
