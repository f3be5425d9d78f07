/**
 * docs/reference/policies-and-algorithms.md: the sliding window's example, `'5/m'`, five
 * requests at 24 s past a minute, then a sixth: the numbers the page gives, on the memory
 * store and on Redis, with a test clock.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { MemoryStore, RateLimiter, RedisStore } from '../../lib/index.js';
import { newRedis } from '../harness/redis.js';

describe.each(['memory', 'redis'] as const)("the page's sliding window example, on %s", (kind) => {
  const client = kind === 'redis' ? newRedis() : undefined;
  afterAll(async () => {
    await client?.quit();
  });

  it('5/m: five at 24 s past a minute admitted; the sixth refused, Retry-After 48 s, reset 96 s; 48 s on, admitted', async () => {
    // 24 s past a whole minute.
    let now = 1_800_000_000_000 + 24_000;
    const clock = () => now;
    const store =
      client === undefined
        ? new MemoryStore({ clock, sweepIntervalMs: 0 })
        : new RedisStore({ client, clock });
    const limiter = new RateLimiter({
      store,
      prefix: `doc${randomUUID().slice(0, 8)}`,
      timeoutMs: 5000,
    });
    const policy = { rate: '5/m', algorithm: 'sliding-window' as const };
    const spend = async () => (await limiter.consume('client', policy)).policies[0]!;
    for (let i = 0; i < 4; i++) expect((await spend()).allowed).toBe(true);
    // The fifth's reset: the budget is full again at the end of the next minute.
    expect(await spend()).toMatchObject({ allowed: true, remaining: 0, resetMs: 96_000 });
    expect(await spend()).toMatchObject({
      allowed: false,
      remaining: 0,
      retryAfterMs: 48_000,
      resetMs: 96_000,
    });
    now += 47_999;
    expect((await spend()).allowed).toBe(false);
    now += 1;
    expect((await spend()).allowed).toBe(true);
    if (store instanceof RedisStore) await store.close();
  });
});
