/**
 * The commands the Redis guide lists for an ACL user of least privilege ("The commands the
 * scripts run") are all the store needs: a user granted exactly those, and nothing else, and
 * the keys of its prefix (`~acl:*`), runs every algorithm, a penalty, a refund, a concurrency
 * limit, an override, an exemption, `inspect` and `reset` without a NOPERM. (The consume script wrote with `PSETEX` for a while
 * before the guide said so: such a user's every request failed, and fail-open admitted it.)
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { RateLimiter, RateLimitService, RedisStore } from '../../lib/index.js';
import { ALGORITHMS } from '../../lib/core/model/policy.js';
import { privateRedis } from '../harness/redis.js';

/** The commands the guide's paragraph names, in backquotes (less Cluster's, for Cluster only). */
function documentedCommands(): string[] {
  const guide = readFileSync(
    new URL('../../docs/guides/redis-in-production.md', import.meta.url),
    'utf8',
  );
  const start = guide.indexOf('The commands the scripts run');
  const paragraph = guide.slice(start, guide.indexOf('\n\n', start));
  const cluster = ['CLUSTER', 'KEYSLOT', 'COUNTKEYSINSLOT', 'GETKEYSINSLOT'];
  const named = [...paragraph.matchAll(/`([A-Z]+)`/g)].map((m) => m[1]!);
  return [...new Set(named)].filter((c) => !cluster.includes(c));
}

describe('an ACL user granted only the commands the Redis guide lists', () => {
  const redis = privateRedis();
  let user: Redis;
  const name = `nrl${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    const commands = documentedCommands();
    // The paragraph was found, and names the scripts' calls.
    expect(commands).toEqual(expect.arrayContaining(['EVALSHA', 'GET', 'PTTL', 'HGETALL']));
    await redis.client.call(
      'ACL',
      'SETUSER',
      name,
      'on',
      '>secret',
      '~acl:*',
      'resetchannels',
      '-@all',
      ...commands.map((c) => `+${c.toLowerCase()}`),
    );
    user = new Redis(redis.server.url, {
      username: name,
      password: 'secret',
      autoResendUnfulfilledCommands: false,
    });
  });
  afterAll(() => user?.disconnect());

  it('decides, refunds, releases, controls, inspects and resets without a refusal', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore({ client: user }),
      prefix: 'acl',
      timeoutMs: 5000,
    });
    const service = new RateLimitService(limiter);
    for (const algorithm of ALGORITHMS) {
      const policy = { rate: '2/m', algorithm, name: algorithm, block: '1m' } as const;
      expect((await limiter.consume('ip:a', policy)).allowed).toBe(true);
      const { decision, spending } = await limiter.spend([{ identity: 'ip:a', policy }]);
      expect(decision.allowed).toBe(true);
      expect(await limiter.refund(spending!)).toBe(1);
      expect((await limiter.consume('ip:a', policy)).allowed).toBe(true);
      // Refused: the block starts, and holds.
      expect((await limiter.consume('ip:a', policy)).allowed).toBe(false);
      expect((await limiter.consume('ip:a', policy)).policies[0]!.blocked).toBe(true);
    }
    const slots = { name: 'inflight', concurrent: 1, leaseMs: 60_000 } as const;
    const held = await limiter.consume('ip:a', slots);
    expect(held.allowed).toBe(true);
    expect((await limiter.consume('ip:a', slots)).allowed).toBe(false);
    expect(await limiter.release(held.leases!)).toBe(1);
    await service.setOverride('ip:b', '*', '50/m', { ttlMs: 60_000, reason: 'acl test' });
    await service.exempt('ip:c', { ttlMs: 60_000, reason: 'acl test' });
    for (const algorithm of ALGORITHMS) {
      const policy = { rate: '1/m', algorithm, name: algorithm } as const;
      for (const identity of ['ip:b', 'ip:c']) {
        expect((await limiter.consume(identity, policy)).allowed).toBe(true);
        expect((await limiter.consume(identity, policy)).allowed).toBe(true);
      }
    }
    // Every algorithm's policy, each blocked; the fixed window's count read on the server
    // clock (the value) with its window's end (the expiry).
    const inspected = await service.inspect('ip:a');
    expect(inspected.map((p) => p.algorithm).sort()).toEqual([...ALGORITHMS].sort());
    expect(inspected.every((p) => (p.blockedMs ?? 0) > 0)).toBe(true);
    const fixed = inspected.find((p) => p.algorithm === 'fixed-window')!;
    expect(fixed.state).toEqual({ count: 2, windowEndMs: expect.any(Number) });
    // Each policy's state and its block.
    expect(await service.reset('ip:a')).toBe(2 * ALGORITHMS.length);
  });
});
