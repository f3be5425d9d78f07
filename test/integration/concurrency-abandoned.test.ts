/**
 * Slots nobody is left to give back (review of issue 15): a consume that timed out still
 * runs in Redis later and takes its slot; the limiter gives such slots back at once instead
 * of leaving the identity refused for a whole lease. And a store without `release` makes a
 * concurrency route log, not crash the process.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import {
  RateLimitBackendError,
  RateLimiter,
  RedisStore,
  type PolicyInput,
} from '../../lib/index.js';
import { commandCalls, privateRedis } from '../harness/redis.js';
import { pollUntil, uniquePrefix } from '../e2e/support/app.js';

const redis = privateRedis();
const clients: Redis[] = [];
afterAll(() => clients.forEach((c) => c.disconnect()));

const ONE_SLOT: PolicyInput = { name: 'inflight', concurrent: 1, leaseMs: 30_000 };

describe('a consume that timed out', () => {
  it('has its slot given back once Redis runs it late, not after the 30 s lease', async () => {
    const client = new Redis(redis.server.url, { autoResendUnfulfilledCommands: false });
    clients.push(client);
    const limiter = new RateLimiter({
      store: new RedisStore({ client, controlRefreshMs: 0 }),
      prefix: uniquePrefix(),
      timeoutMs: 50,
      circuitBreaker: false,
    });
    await redis.client.config('RESETSTAT');
    // Scripts are writes: held by the pause, then run in order, late.
    await redis.client.client('PAUSE', 300, 'WRITE');
    const error = await limiter.consume('ip:203.0.113.9', ONE_SLOT).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitBackendError);
    expect((error as RateLimitBackendError).kind).toBe('timeout');
    // Once the pause ends, the late consume takes the slot and the release after it frees it.
    const freed = () =>
      limiter.peek('ip:203.0.113.9', ONE_SLOT).then((d) => d.policies[0]!.remaining === 1);
    expect(
      await pollUntil(async () => ((await commandCalls(redis.client)).evalsha ?? 0) >= 2, 3000),
    ).toBe(true);
    expect(await pollUntil(freed, 3000)).toBe(true);
    const next = await limiter.consume('ip:203.0.113.9', ONE_SLOT);
    expect(next.allowed).toBe(true);
    expect(next.leases).toHaveLength(1);
  });
});
