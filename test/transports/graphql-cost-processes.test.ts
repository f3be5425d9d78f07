/**
 * Issue 25: the refund leaves a budget at `budget - actual cost` under concurrency, from two
 * app processes on one Redis (support/cost-worker.ts, each an OS process of its own): every
 * operation is charged its requested cost before it runs and given back what it did not use
 * after, atomically, so whatever the interleaving the points spent are the actual costs of the
 * operations admitted, and no more are admitted than the budget allows at the requested cost.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { redisUrl } from '../harness/redis.js';
import { uniquePrefix } from '../e2e/support/app.js';

const WORKER = fileURLToPath(new URL('./support/cost-worker.ts', import.meta.url));
const QUERY = '{ posts(first: 5) { id author { id } } }';
/** Points per day: it refills 0.0035 points a second, nothing within the test. */
const BUDGET = 300;

interface Reply {
  errors?: { extensions?: { code?: string } }[];
  extensions?: {
    cost?: { actualQueryCost: number; throttleStatus?: { currentlyAvailable: number } };
  };
}

async function start(
  server: string,
  prefix: string,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx/esm',
      WORKER,
      JSON.stringify({ server, redis: redisUrl(), prefix, budget: `${BUDGET}/d` }),
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout!.setEncoding('utf8');
  for await (const chunk of child.stdout!) {
    out += chunk as string;
    const match = /listening (\S+)/.exec(out);
    if (match) return { child, url: match[1]! };
  }
  throw new Error(`the worker exited before listening: ${out}`);
}

async function query(url: string, query = QUERY): Promise<Reply> {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
  return (await response.json()) as Reply;
}

describe.each(['apollo', 'mercurius'])('a budget shared by two %s processes', (server) => {
  const workers: { child: ChildProcess; url: string }[] = [];
  beforeAll(async () => {
    const prefix = uniquePrefix();
    workers.push(...(await Promise.all([start(server, prefix), start(server, prefix)])));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(
      workers.map(async ({ child }) => {
        child.stdin!.end();
        if (child.exitCode === null) await once(child, 'exit');
      }),
    );
  });

  it('ends at budget - actual cost of what was admitted, admitting within the budget', async () => {
    // 60 at once, 30 to each process: requested 15 each (900 in all), actual 9 each.
    const replies = await Promise.all(
      Array.from({ length: 60 }, (_, i) => query(workers[i % 2]!.url)),
    );
    const admitted = replies.filter((r) => r.errors === undefined);
    const refused = replies.filter((r) => r.errors?.[0]?.extensions?.code === 'RATE_LIMITED');
    expect(admitted.length + refused.length).toBe(60);
    expect(admitted.every((r) => r.extensions?.cost?.actualQueryCost === 9)).toBe(true);
    // At least what fits at the requested cost; at most what fits at the actual cost.
    expect(admitted.length).toBeGreaterThanOrEqual(Math.floor(BUDGET / 15));
    expect(admitted.length).toBeLessThanOrEqual(Math.floor(BUDGET / 9));
    // `{ me }` costs the minimum, 1: it reads the budget, spending that point.
    const probe = await query(workers[0]!.url, '{ me }');
    expect(probe.extensions?.cost?.throttleStatus?.currentlyAvailable).toBe(
      BUDGET - 9 * admitted.length - 1,
    );
  }, 60_000);
});
