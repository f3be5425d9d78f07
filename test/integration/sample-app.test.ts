import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startApp, type RunningApp } from '../../demo/app.js';
import { redisUrl } from '../harness/redis.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

// The sample app as users run it: built, imported by its package name, two processes.
describe('two sample-app processes on one Redis', () => {
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    execSync('npm run build --silent && npx tsc -p sample-app/tsconfig.json', {
      cwd: ROOT,
      stdio: 'pipe',
    });
    const main = `${ROOT}dist-sample/sample-app/main.js`;
    for (let i = 0; i < 2; i++) apps.push(await startApp({ main, env: { REDIS_URL: redisUrl() } }));
  }, 120_000);

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
