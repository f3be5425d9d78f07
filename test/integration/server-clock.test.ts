import { afterAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { RateLimiter, RedisStore, type Algorithm } from '../../lib/index.js';
import { policyKey } from '../../lib/core/model/store-keys.js';
import { newRedis } from '../harness/redis.js';

/**
 * Token bucket and GCRA on the Redis server clock keep their debt in the key's expiry (see
 * stores/redis/lua/consume.ts), a path the injected-clock tests never take. Time is moved by
 * shortening the expiry, as elapsed time would; the few ms that really pass during a test
 * can only lower a debt, so bounds are one-sided and tight.
 */
describe.each(['token-bucket', 'gcra'] as const)(
  '%s on the server clock',
  (algorithm: Algorithm) => {
    const client = newRedis({ autoResendUnfulfilledCommands: false });
    afterAll(() => client.quit());

    function setup() {
      const prefix = `sc${randomUUID().slice(0, 8)}`;
      const limiter = new RateLimiter({
        store: new RedisStore({ client }),
        prefix,
        timeoutMs: 5000,
      });
      const key = () =>
        policyKey(prefix, 'u', 'global', 'default', algorithm === 'gcra' ? 'gcra' : 'tb');
      return { limiter, key };
    }

    it('a whole-ms emission interval: the TAT is the expiry and nothing else is stored', async () => {
      const { limiter, key } = setup();
      const policy = { rate: '10/s', algorithm } as const; // T = 100 ms
      const start = Date.now();
      const first = await limiter.consume('u', policy, { cost: 4 });
      expect(first.allowed).toBe(true);
      expect(first.policies[0]).toMatchObject({ remaining: 6, resetMs: 400 });
      const pttl = await client.pttl(key());
      expect(pttl).toBeGreaterThanOrEqual(400 - (Date.now() - start));
      expect(pttl).toBeLessThanOrEqual(400);
      expect(await client.get(key())).toBe('0');
      // 7 more cannot fit (6 left); nothing is spent, and the wait is what 1 token takes.
      const denied = await limiter.consume('u', policy, { cost: 7 });
      expect(denied.allowed).toBe(false);
      expect(denied.policies[0]!.retryAfterMs).toBeGreaterThanOrEqual(
        100 - (Date.now() - start) - 1,
      );
      expect(denied.policies[0]!.retryAfterMs).toBeLessThanOrEqual(100);
      expect(await client.pttl(key())).toBeLessThanOrEqual(pttl);
      // 250 ms later (the expiry moved 250 ms closer), 2.5 tokens are back: 8 left.
      await client.pexpire(key(), (await client.pttl(key())) - 250);
      // (Each ms that really passed since the first call returns 0.01 token more.)
      const left = (await limiter.peek('u', policy)).policies[0]!.remaining;
      expect(left).toBeGreaterThanOrEqual(8);
      expect(left).toBeLessThanOrEqual(Math.floor(8.5 + (Date.now() - start) / 100));
    });

    it('a fractional emission interval keeps the sub-ms credit exact', async () => {
      const { limiter, key } = setup();
      const policy = { rate: '3/s', algorithm } as const; // T = 333.33 ms = 1000 ticks of 1/3 ms
      const start = Date.now();
      expect((await limiter.consume('u', policy)).allowed).toBe(true);
      // Debt 1000 ticks = 333.33 ms: the expiry is rounded up to 334 ms, credit 2 ticks.
      expect(await client.get(key())).toBe('2');
      expect(await client.pttl(key())).toBeLessThanOrEqual(334);
      for (let i = 0; i < 2; i++) expect((await limiter.consume('u', policy)).allowed).toBe(true);
      // 3 × 1000 ticks = 1000 ms exactly: no credit left over.
      expect(await client.get(key())).toBe('0');
      const denied = await limiter.consume('u', policy);
      expect(denied.allowed).toBe(false);
      expect(denied.policies[0]!.retryAfterMs).toBeLessThanOrEqual(334);
      expect(denied.policies[0]!.retryAfterMs).toBeGreaterThanOrEqual(
        334 - (Date.now() - start) - 1,
      );
    });

    it('a credit that is not a whole number of ticks below the limit counts as none', async () => {
      const { limiter, key } = setup();
      // A value from elsewhere (an older format's TAT) on a full 3/s bucket: 1000 ms of debt.
      await client.set(key(), '1732950000000', 'PX', 1000);
      const d = await limiter.consume('u', { rate: '3/s', algorithm });
      expect(d.allowed).toBe(false);
      expect(d.policies[0]!.remaining).toBe(0);
    });

    it('a key without an expiry (not written by us) counts as no debt and gets one', async () => {
      const { limiter, key } = setup();
      await client.set(key(), 'junk');
      const d = await limiter.consume('u', { rate: '5/m', algorithm });
      expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 4 });
      expect(await client.pttl(key())).toBeGreaterThan(11_000);
    });
  },
);
