/**
 * The deny cache against a real Redis (issue 7): a flood from one refused client is answered
 * from memory, with honest waits, and resets and overrides are seen at once.
 */
import 'reflect-metadata';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { RateLimiter, RateLimitService, RedisStore } from '../../lib/index.js';
import { CapturingLogger } from '../e2e/support/app.js';
import { commandCalls, privateRedis } from '../harness/redis.js';

beforeAll(() => Logger.overrideLogger(new CapturingLogger()));

describe('the deny cache', () => {
  const redis = privateRedis();
  const evalshaCalls = async () => (await commandCalls(redis.client)).evalsha ?? 0;

  function setup(prefix: string) {
    const { client } = redis;
    let now = Date.now();
    const limiter = new RateLimiter({
      store: new RedisStore({ client }),
      prefix,
      timeoutMs: 5000,
      denyCache: { clock: () => now, maxAgeMs: 60_000 },
    });
    return { limiter, tick: (ms: number) => (now += ms) };
  }

  it('10,000 requests from one refused client make fewer than 10 Redis calls, with exact waits', async () => {
    const { limiter, tick } = setup('dc1');
    const policy = { rate: '5/m', algorithm: 'fixed-window' } as const;
    for (let i = 0; i < 5; i++) expect((await limiter.consume('ip:1', policy)).allowed).toBe(true);
    await redis.client.config('RESETSTAT');
    const first = await limiter.consume('ip:1', policy);
    expect(first.allowed).toBe(false);
    const wait = first.policies[0]!.retryAfterMs;
    expect(wait).toBeGreaterThan(59_000);
    for (let i = 1; i <= 10_000; i++) {
      tick(1); // 10 s of local time pass over the flood
      const d = await limiter.consume('ip:1', policy);
      expect(d.allowed).toBe(false);
      expect(d.policies[0]!.retryAfterMs).toBe(wait - i);
    }
    expect(await evalshaCalls()).toBeLessThan(10);
    expect(await evalshaCalls()).toBe(1);
  });

  it('a reset and an override are seen by the next request', async () => {
    const { limiter } = setup('dc2');
    const service = new RateLimitService(limiter);
    const policy = { rate: '2/m' } as const;
    for (let i = 0; i < 3; i++) await limiter.consume('u', policy);
    expect((await limiter.consume('u', policy)).allowed).toBe(false);
    await service.setOverride('u', '*', '100/m', { ttlMs: 60_000, reason: 'ticket' });
    expect((await limiter.consume('u', policy)).policies[0]).toMatchObject({
      allowed: true,
      limit: 100,
    });
    await service.removeOverride('u', '*');
    expect((await limiter.consume('u', policy)).allowed).toBe(false);
    await limiter.reset('u');
    expect((await limiter.consume('u', policy)).allowed).toBe(true);
  });

  it('calls that opt out (shadow policies) always reach Redis', async () => {
    const { limiter } = setup('dc3');
    const entries = [{ identity: 'u', policy: { rate: '1/m' } }];
    await limiter.consumeEach(entries);
    await redis.client.config('RESETSTAT');
    for (let i = 0; i < 20; i++) {
      expect((await limiter.consumeEach(entries, { denyCache: false })).allowed).toBe(false);
    }
    expect(await evalshaCalls()).toBe(20);
  });
});
