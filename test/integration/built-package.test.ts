/**
 * The package as users get it: built into dist/, imported by its name by the sample app,
 * and required from CommonJS. One file, so dist/ is built once, by one worker.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, execSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
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

// A CommonJS app (the Nest 11 default) loads this ESM package through require(esm),
// which Node >= 20.19 has without a flag.
describe('the built package under require()', () => {
  it('loads from a CommonJS script and limits', () => {
    const script = `
      const m = require(${JSON.stringify(`${ROOT}dist/index.js`)});
      const limiter = new m.RateLimiter({ store: new m.MemoryStore({ sweepIntervalMs: 0 }) });
      (async () => {
        const out = [];
        for (let i = 0; i < 3; i++) out.push((await limiter.consume('u', { rate: '2/m' })).allowed);
        console.log(JSON.stringify({ module: typeof m.RateLimitModule, out }));
      })();
    `;
    const stdout = execFileSync(process.execPath, ['--input-type=commonjs', '-e', script], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(JSON.parse(stdout.trim().split('\n').pop()!)).toEqual({
      module: 'function',
      out: [true, true, false],
    });
  });
});
