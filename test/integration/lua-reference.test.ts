import { afterAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { MemoryStore, RateLimiter, RedisStore, type Algorithm } from '../../lib/index.js';
import { ALGORITHMS } from '../../lib/core/model/policy.js';
import { newRedis } from '../harness/redis.js';
import { scenarios, type Scenario } from '../conformance/sequences.js';

/**
 * The Lua bodies against their TypeScript references: the same random sequences through
 * RedisStore and MemoryStore (which runs the references) must give identical decisions.
 */
describe('Lua and TypeScript decide alike', () => {
  const client = newRedis({ autoResendUnfulfilledCommands: false });
  const stores: RedisStore[] = [];
  afterAll(async () => {
    // Each store watches its prefix's control index on a timer: stop them before the client
    // goes. A quit that finds the connection already gone (a loaded CI machine) is no failure
    // of what this suite checks: disconnect instead.
    await Promise.all(stores.map((s) => s.close()));
    await client.quit().catch(() => client.disconnect());
  });

  async function replay(algorithm: Algorithm, s: Scenario, useRedis: boolean) {
    let now = 1_800_000_000_000;
    const clock = () => now;
    const store = useRedis
      ? new RedisStore({ client, clock })
      : new MemoryStore({ clock, sweepIntervalMs: 0 });
    if (store instanceof RedisStore) stores.push(store);
    const limiter = new RateLimiter({
      store,
      prefix: `lua${randomUUID().slice(0, 8)}`,
      timeoutMs: 5000,
    });
    const policy = {
      rate: { limit: s.limit, periodMs: s.periodMs },
      algorithm,
      burst: algorithm === 'token-bucket' || algorithm === 'gcra' ? s.burst : undefined,
    };
    const out = [];
    for (const { waitMs, cost } of s.steps) {
      now += waitMs;
      out.push((await limiter.consume('x', policy, { cost })).policies[0]);
    }
    return out;
  }

  it.each(ALGORITHMS)('%s', async (algorithm) => {
    await fc.assert(
      fc.asyncProperty(scenarios(40, 200), async (s) => {
        expect(await replay(algorithm, s, true)).toEqual(await replay(algorithm, s, false));
      }),
      { numRuns: 60 },
    );
  });
});
