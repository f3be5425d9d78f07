/**
 * Overrides and exemptions applied to requests (issue 7): read by the same store call that
 * decides, on every store. The Redis command counts prove one round trip per request.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { RateLimiter, RateLimitService, RedisStore } from '../../lib/index.js';
import { TestClock } from '../conformance/suite.js';
import { memoryKind, standaloneKind, type StoreKind } from '../conformance/stores.js';
import { CapturingLogger } from '../e2e/support/app.js';
import { commandCalls, privateRedis } from '../harness/redis.js';

beforeAll(() => Logger.overrideLogger(new CapturingLogger()));

describe.each([memoryKind, standaloneKind])(
  'requests under control %p',
  (makeKind: () => StoreKind) => {
    const kind = makeKind();
    afterAll(() => kind.close());

    function setup() {
      const clock = new TestClock();
      const fixture = kind.make(clock.read);
      const limiter = new RateLimiter({
        store: fixture.store,
        prefix: `ct${randomUUID().slice(0, 8)}`,
        timeoutMs: 5000,
      });
      return { clock, limiter, fixture, service: new RateLimitService(limiter) };
    }

    it(`${kind.name}: an override raises 5/m to 50/m for one API key at once, and ends with its ttl`, async () => {
      const { clock, limiter, service } = setup();
      const policy = { rate: '5/m', algorithm: 'gcra' } as const;
      for (let i = 0; i < 5; i++)
        expect((await limiter.consume('key:a', policy)).allowed).toBe(true);
      expect((await limiter.consume('key:a', policy)).allowed).toBe(false);
      await service.setOverride('key:a', '*', '50/m', { ttlMs: 60_000, reason: 'ticket 7' });
      const raised = await limiter.consume('key:a', policy);
      // The override runs a bucket of its own, starting full: this is its first unit.
      expect(raised.policies[0]).toMatchObject({
        allowed: true,
        limit: 50,
        remaining: 49,
        override: { periodMs: 60_000 },
      });
      // Inspect shows the override's own bucket.
      expect(await service.inspect('key:a', undefined, [policy])).toMatchObject([
        { policy: 'default', limit: 50, remaining: 49 },
      ]);
      // Another key is not affected.
      for (let i = 0; i < 5; i++) await limiter.consume('key:b', policy);
      expect((await limiter.consume('key:b', policy)).policies[0]).toMatchObject({
        allowed: false,
        limit: 5,
      });
      // After the ttl, 5/m again, on the policy's own bucket.
      clock.now += 60_000;
      const after = await limiter.consume('key:a', policy);
      expect(after.policies[0]!.limit).toBe(5);
      expect(after.policies[0]!.override).toBeUndefined();
    });

    it(`${kind.name}: the most specific override wins, and another scope keeps its rate`, async () => {
      const { limiter, service } = setup();
      await service.setOverride('u', '*', '100/m', { ttlMs: 60_000, reason: 'all' });
      await service.setOverride('u', 'reports', '2/m', {
        ttlMs: 60_000,
        reason: 'one policy',
        policy: 'burst',
      });
      const stacked = [
        { name: 'burst', rate: '10/m' },
        { name: 'daily', rate: '1000/d' },
      ];
      const d = await limiter.consume('u', stacked, { scope: 'reports' });
      expect(d.policies.map((p) => [p.name, p.limit, p.remaining])).toEqual([
        ['burst', 2, 1],
        ['daily', 100, 99],
      ]);
      const other = await limiter.consume('u', { rate: '10/m' }, { scope: 'search' });
      expect(other.policies[0]).toMatchObject({ limit: 100, remaining: 99 });
    });

    it(`${kind.name}: a window policy back from an override is not locked out`, async () => {
      const { clock, limiter, service } = setup();
      const fixed = { name: 'f', rate: '100/m', algorithm: 'fixed-window' } as const;
      const sliding = { name: 's', rate: '1000/d', algorithm: 'sliding-window' } as const;
      await service.setOverride('u', '*', '10000/d', { ttlMs: 60_000, reason: 'f', policy: 'f' });
      await service.setOverride('u', '*', '100/m', { ttlMs: 60_000, reason: 's', policy: 's' });
      for (let i = 0; i < 3; i++) {
        expect((await limiter.consume('u', [fixed, sliding], { cost: 30 })).allowed).toBe(true);
      }
      clock.now += 60_000; // both overrides end
      const back = await limiter.consume('u', [fixed, sliding]);
      expect(back.policies.map((p) => [p.name, p.allowed, p.limit, p.remaining])).toEqual([
        ['f', true, 100, 99],
        ['s', true, 1000, 999],
      ]);
      expect(Math.max(...back.policies.map((p) => p.resetMs))).toBeLessThanOrEqual(2 * 86_400_000);
    });

    it(`${kind.name}: an exempt identity is never refused and spends nothing`, async () => {
      const { clock, limiter, service } = setup();
      const policy = { rate: '5/m' } as const;
      await service.exempt('partner', { ttlMs: 10_000, reason: 'load test' });
      for (let i = 0; i < 20; i++) {
        const d = await limiter.consume('partner', policy, { cost: 2 });
        expect(d.policies[0]).toMatchObject({ allowed: true, exempt: true, remaining: 5 });
      }
      clock.now += 10_000;
      const d = await limiter.consume('partner', policy, { cost: 2 });
      expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 3 });
      expect(d.policies[0]!.exempt).toBeUndefined();
    });

    // Regression: a 1 s override at 100/h left its state keys for up to 1.4 h.
    it.each(['fixed-window', 'sliding-window', 'token-bucket', 'gcra'] as const)(
      `${kind.name}: %s state under an override expires when the override ends`,
      async (algorithm) => {
        const { limiter, service, fixture } = setup();
        const policy = { rate: '5/m', algorithm };
        await service.setOverride('key:o', '*', '100/h', { ttlMs: 1000, reason: 'short' });
        expect((await limiter.consume('key:o', policy)).policies[0]).toMatchObject({
          allowed: true,
          limit: 100,
        });
        const [state] = await service.inspect('key:o', undefined, [policy]);
        expect(state!.key).toMatch(/:o\d+$/);
        const left = await fixture.pttl(state!.key);
        expect(left).toBeGreaterThan(0);
        expect(left).toBeLessThanOrEqual(1000);
      },
    );
  },
);

describe('on a private Redis', () => {
  const redis = privateRedis();

  it('an override in force is applied inside the one EVALSHA of each request', async () => {
    const { client } = redis;
    const limiter = new RateLimiter({ store: new RedisStore({ client }), prefix: 'rt' });
    const service = new RateLimitService(limiter);
    await limiter.peek('key:a', { rate: '5/m' }); // the script is loaded
    await service.setOverride('key:a', '*', '50/m', { ttlMs: 60_000, reason: 'count' });
    await client.config('RESETSTAT');
    for (let i = 0; i < 10; i++) {
      expect((await limiter.consume('key:a', { rate: '5/m' })).policies[0]!.limit).toBe(50);
    }
    // Inside the script: HGETALL of the control hash, TIME (for its expiry), then GET and
    // PSETEX of the override's own bucket, whose debt is in its value so that the key can expire
    // with the override. Nothing outside it.
    // Without the test's own INFO and CONFIG RESETSTAT.
    const { info: _info, 'config|resetstat': _reset, ...counts } = await commandCalls(client);
    expect(counts).toEqual({ evalsha: 10, hgetall: 10, time: 10, get: 10, psetex: 10 });
  });

  it('on the server clock, a GCRA override keeps its debt to the ms and its key ends with it', async () => {
    const { client } = redis;
    const limiter = new RateLimiter({ store: new RedisStore({ client }), prefix: 'oe' });
    const service = new RateLimitService(limiter);
    const policy = { rate: '5/m', algorithm: 'gcra' } as const;
    await service.setOverride('key:g', '*', '2/h', { ttlMs: 10_000, reason: 'slow down' });
    const decisions = [];
    for (let i = 0; i < 3; i++)
      decisions.push((await limiter.consume('key:g', policy)).policies[0]!);
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, false]);
    // The third waits for the override's emission interval (30 min), less the ms gone by.
    expect(decisions[2]!.retryAfterMs).toBeGreaterThan(1_800_000 - 5_000);
    expect(decisions[2]!.retryAfterMs).toBeLessThanOrEqual(1_800_000);
    const keys = await client.keys('oe:{key:g}:*:o*');
    expect(keys).toHaveLength(1);
    const left = await client.pttl(keys[0]!);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(10_000);
    expect(await client.keys('oe:{key:g}:*gcra')).toEqual([]);
  });

  it('out-of-bounds or malformed fields are ignored, never misread', async () => {
    const { client } = redis;
    // No index: a hand-written hash is read only when every request reads its control hash.
    const limiter = new RateLimiter({
      store: new RedisStore({ client, controlRefreshMs: 0 }),
      prefix: 'hw',
    });
    const until = Date.now() + 60_000;
    await client.hset(
      'hw:{u}:ctl',
      'o:*:*',
      `${until}:1:60000:99999999999999999999`,
      'exempt',
      '1e13',
    );
    await client.pexpire('hw:{u}:ctl', 60_000);
    const d = await limiter.consume('u', { rate: '5/m' });
    expect(d.policies[0]).toMatchObject({ allowed: true, limit: 5, remaining: 4 });
    expect(d.policies[0]!.exempt).toBeUndefined();
    expect(d.policies[0]!.override).toBeUndefined();
  });
});
