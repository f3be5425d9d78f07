/**
 * Operating the limiter (issue 7): inspect, reset, overrides and exemptions, on every store.
 * Exact values come from an injected clock; the server-clock tests use one-sided bounds.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { RateLimiter, RateLimitService, RedisStore, type PolicyInput } from '../../lib/index.js';
import { controlKey, policyKey } from '../../lib/core/model/store-keys.js';
import { TestClock } from '../conformance/suite.js';
import { memoryKind, standaloneKind, type StoreKind } from '../conformance/stores.js';
import { CapturingLogger } from '../e2e/support/app.js';
import { newRedis } from '../harness/redis.js';

const logs = new CapturingLogger();
beforeAll(() => Logger.overrideLogger(logs));
beforeEach(() => logs.clear());

const POLICIES: PolicyInput[] = [
  { name: 'bucket', rate: '10/s', algorithm: 'token-bucket', cost: 4 },
  { name: 'cell', rate: '3/s', algorithm: 'gcra', cost: 1 },
  { name: 'fixed', rate: '5/m', algorithm: 'fixed-window', cost: 2 },
  { name: 'sliding', rate: '5/s', algorithm: 'sliding-window', cost: 3 },
];

describe.each([memoryKind, standaloneKind])('operating %p', (makeKind: () => StoreKind) => {
  const kind = makeKind();
  afterAll(() => kind.close());

  function setup() {
    const clock = new TestClock();
    const fixture = kind.make(clock.read);
    const prefix = `op${randomUUID().slice(0, 8)}`;
    const limiter = new RateLimiter({ store: fixture.store, prefix, timeoutMs: 5000 });
    return { clock, fixture, prefix, limiter, service: new RateLimitService(limiter) };
  }

  it(`${kind.name}: inspect after known traffic reports each algorithm's exact state`, async () => {
    const { clock, limiter, prefix, service } = setup();
    const t0 = clock.now;
    expect((await limiter.consume('u', POLICIES, { scope: 'jobs' })).allowed).toBe(true);
    clock.now += 150;
    const known = await service.inspect('u', undefined, POLICIES);
    const key = (name: string, tag: string) => policyKey(prefix, 'u', 'jobs', name, tag);
    expect(known).toEqual([
      {
        key: key('bucket', 'tb'),
        scope: 'jobs',
        policy: 'bucket',
        algorithm: 'token-bucket',
        // 4 tokens spent at 10/s, 150 ms refilled 1.5 of them.
        state: { tokens: 7.5 },
        resetMs: 250,
        limit: 10,
        remaining: 7,
      },
      {
        key: key('cell', 'gcra'),
        scope: 'jobs',
        policy: 'cell',
        algorithm: 'gcra',
        // TAT = t0 + 333.33 ms, shown rounded up.
        state: { tatMs: t0 + 334 },
        resetMs: 184,
        limit: 3,
        remaining: 2,
      },
      {
        key: key('fixed', 'fwc'),
        scope: 'jobs',
        policy: 'fixed',
        algorithm: 'fixed-window',
        state: { count: 2, windowEndMs: t0 + 60_000 },
        resetMs: 59_850,
        limit: 5,
        remaining: 3,
      },
      {
        key: key('sliding', 'swc'),
        scope: 'jobs',
        policy: 'sliding',
        algorithm: 'sliding-window',
        state: { windowIndex: t0 / 1000, current: 3, previous: 0 },
        resetMs: 1850,
        limit: 5,
        remaining: 2,
      },
    ]);
    // Without the rates: the same keys, the token bucket as its debt, no limit or remaining.
    const unknown = await service.inspect('u');
    expect(unknown.slice(0, 3).map((e) => [e.policy, e.state, e.resetMs, e.limit])).toEqual([
      ['bucket', { debtMs: 250 }, 250, undefined],
      ['cell', { tatMs: t0 + 334 }, 184, undefined],
      ['fixed', { count: 2, windowEndMs: t0 + 60_000 }, 59_850, undefined],
    ]);
    // Without its period, a sliding window's reset is its key's TTL: set to 2000 ms at the
    // write, counting down on the store's own clock (Redis runs in real time, not the test's).
    expect(unknown[3]).toMatchObject({
      policy: 'sliding',
      state: { windowIndex: t0 / 1000, current: 3, previous: 0 },
    });
    expect(unknown[3]!.limit).toBeUndefined();
    expect(unknown[3]!.resetMs).toBeGreaterThanOrEqual(1850);
    expect(unknown[3]!.resetMs).toBeLessThanOrEqual(2000);
    expect(await service.inspect('u', 'other')).toEqual([]);
    expect(await service.inspect('nobody')).toEqual([]);
  });

  it(`${kind.name}: reset makes the next request admitted and keeps overrides`, async () => {
    const { limiter, service, fixture, prefix } = setup();
    const policy = { rate: '2/h' };
    await service.setOverride('u', 'other', '9/h', { ttlMs: 60_000, reason: 'kept' });
    const decisions = [];
    for (let i = 0; i < 3; i++) decisions.push((await service.check('u', policy)).allowed);
    expect(decisions).toEqual([true, true, false]);
    expect(await service.reset('u')).toBe(1);
    expect((await service.check('u', policy)).allowed).toBe(true);
    expect(await fixture.pttl(policyKey(prefix, 'u', 'global', 'default', 'tb'))).toBeGreaterThan(
      0,
    );
    expect((await service.listOverrides('u')).overrides).toHaveLength(1);
    expect(limiter).toBeDefined();
  });

  it(`${kind.name}: inspect reports the override in force, by precedence`, async () => {
    const { clock, limiter, service } = setup();
    await limiter.consume('u', { name: 'a', rate: '10/s', cost: 8 }, { scope: 'jobs' });
    await service.setOverride('u', '*', '100/s', { ttlMs: 5000, reason: 'any' });
    await service.setOverride('u', 'jobs', '20/s', { ttlMs: 400, reason: 'scope', burst: 40 });
    let [entry] = await service.inspect('u');
    expect(entry).toMatchObject({
      limit: 20,
      // Under an override a token bucket runs a bucket of its own, starting full (burst 40).
      remaining: 40,
      override: { limit: 20, periodMs: 1000, burst: 40, expiresInMs: 400 },
    });
    await service.setOverride('u', 'jobs', '30/s', { policy: 'a', ttlMs: 200, reason: 'exact' });
    [entry] = await service.inspect('u');
    expect(entry!.override).toEqual({ limit: 30, periodMs: 1000, expiresInMs: 200 });
    clock.now += 200;
    [entry] = await service.inspect('u');
    expect(entry!.override).toEqual({ limit: 20, periodMs: 1000, burst: 40, expiresInMs: 200 });
    clock.now += 200;
    [entry] = await service.inspect('u');
    // The override's own bucket, still full: nothing was spent under it.
    expect(entry).toMatchObject({
      limit: 100,
      remaining: 100,
      override: { limit: 100, periodMs: 1000, expiresInMs: 4600 },
    });
    await service.removeOverride('u', '*');
    [entry] = await service.inspect('u');
    expect(entry!.override).toBeUndefined();
    expect(entry!.limit).toBeUndefined();
  });

  it(`${kind.name}: overrides and the exemption are listed, end on their own, and are pruned`, async () => {
    const { clock, service } = setup();
    await service.setOverride('u', 'jobs', '100/m', { policy: 'daily', ttlMs: 1000, reason: 'r1' });
    await service.exempt('u', { ttlMs: 3000, reason: 'incident 7' });
    expect(await service.listOverrides('u')).toEqual({
      exemption: { expiresInMs: 3000, reason: 'incident 7' },
      overrides: [
        {
          scope: 'jobs',
          policy: 'daily',
          limit: 100,
          periodMs: 60_000,
          expiresInMs: 1000,
          reason: 'r1',
        },
      ],
    });
    clock.now += 1000;
    expect(await service.listOverrides('u')).toEqual({
      exemption: { expiresInMs: 2000, reason: 'incident 7' },
      overrides: [],
    });
    expect(await service.removeExemption('u')).toBe(true);
    expect(await service.removeExemption('u')).toBe(false);
    expect(await service.listOverrides('u')).toEqual({ overrides: [] });
  });

  it(`${kind.name}: bad override and exemption input is refused with RateLimitConfigError`, async () => {
    const { service } = setup();
    const ok = { ttlMs: 1000, reason: 'why' };
    const bad: [() => Promise<unknown>, string][] = [
      [() => service.setOverride('u', '*', '0/m', ok), 'ERR_RATE_LIMIT_RATE'],
      [() => service.setOverride('u', 'a b', '1/m', ok), 'ERR_RATE_LIMIT_SCOPE'],
      [() => service.setOverride('u', '*', '1/m', { ...ok, policy: 'x:y' }), 'ERR_RATE_LIMIT_NAME'],
      [() => service.setOverride('u', '*', '1/m', { ...ok, burst: 0 }), 'ERR_RATE_LIMIT_BURST'],
      [() => service.setOverride('u', '*', '1/m', { ...ok, ttlMs: 0 }), 'ERR_RATE_LIMIT_CONTROL'],
      [
        () => service.setOverride('u', '*', '1/m', { ...ok, ttlMs: 2 ** 31 }),
        'ERR_RATE_LIMIT_CONTROL',
      ],
      [() => service.setOverride('u', '*', '1/m', { ...ok, ttlMs: 1.5 }), 'ERR_RATE_LIMIT_CONTROL'],
      [() => service.setOverride('u', '*', '1/m', { ...ok, reason: '' }), 'ERR_RATE_LIMIT_CONTROL'],
      [
        () => service.setOverride('u', '*', '1/m', { ...ok, reason: 'x'.repeat(201) }),
        'ERR_RATE_LIMIT_CONTROL',
      ],
      [() => service.exempt('', ok), 'ERR_RATE_LIMIT_CONTROL'],
      [() => service.exempt('u', { ttlMs: -1, reason: 'r' }), 'ERR_RATE_LIMIT_CONTROL'],
    ];
    for (const [call, code] of bad) await expect(call()).rejects.toMatchObject({ code });
    expect(await service.listOverrides('u')).toEqual({ overrides: [] });
    expect(logs.lines).toEqual([]);
  });

  it(`${kind.name}: every change logs one audit line with the identity hashed`, async () => {
    const { service } = setup();
    await service.setOverride('user:42', 'jobs', '100/m', {
      ttlMs: 1000,
      reason: 'load test',
      burst: 150,
    });
    await service.removeOverride('user:42', 'jobs');
    await service.exempt('user:42', { ttlMs: 2000, reason: 'incident' });
    await service.removeExemption('user:42');
    await service.listOverrides('user:42');
    const lines = logs.lines.map((l) => [l.level, l.message]);
    expect(lines).toHaveLength(4);
    const parsed = lines.map(([, m]) => {
      const space = m!.indexOf(' ');
      return [m!.slice(0, space), JSON.parse(m!.slice(space + 1))];
    });
    const identity = parsed[0]![1].identity as string;
    expect(identity).toMatch(/^[A-Za-z0-9_-]{12}$/);
    expect(JSON.stringify(lines)).not.toContain('user:42');
    expect(parsed).toEqual([
      [
        'rate_limit.override_set',
        {
          identity,
          scope: 'jobs',
          policy: '*',
          rate: '100/m',
          burst: 150,
          ttlMs: 1000,
          reason: 'load test',
        },
      ],
      ['rate_limit.override_removed', { identity, scope: 'jobs', policy: '*', removed: true }],
      ['rate_limit.exemption_set', { identity, ttlMs: 2000, reason: 'incident' }],
      ['rate_limit.exemption_removed', { identity, removed: true }],
    ]);
    expect(lines.every(([level]) => level === 'log')).toBe(true);
  });

  it(`${kind.name}: every change names its actor when one is given, and refuses a bad one`, async () => {
    const { service } = setup();
    logs.lines.length = 0;
    const actor = 'ops:alice';
    await service.setOverride('user:43', '*', '10/s', { ttlMs: 1000, reason: 'r', actor });
    await service.removeOverride('user:43', '*', { actor });
    await service.exempt('user:43', { ttlMs: 1000, reason: 'r', actor });
    await service.removeExemption('user:43', { actor });
    const actors = logs.lines.map((l) => JSON.parse(l.message.slice(l.message.indexOf(' ') + 1)));
    expect(actors.map((d: { actor?: string }) => d.actor)).toEqual([actor, actor, actor, actor]);
    for (const bad of ['', 'a\nb', 'x'.repeat(201), 42]) {
      await expect(
        service.exempt('user:43', { ttlMs: 1000, reason: 'r', actor: bad as string }),
      ).rejects.toThrow(/invalid actor/);
    }
  });
});

describe('the control hash on the Redis server clock', () => {
  const redis = newRedis({ autoResendUnfulfilledCommands: false });
  afterAll(() => redis.quit());

  async function serverNow(): Promise<number> {
    const [s, us] = await redis.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  function setup() {
    const prefix = `ctl${randomUUID().slice(0, 8)}`;
    const limiter = new RateLimiter({
      store: new RedisStore({ client: redis }),
      prefix,
      timeoutMs: 5000,
    });
    return { prefix, service: new RateLimitService(limiter) };
  }

  it('writes exactly <untilMs>:<limit>:<periodMs>:<burst> with its reason, and the hash expires with its longest entry', async () => {
    const { prefix, service } = setup();
    const key = controlKey(prefix, 'user:42');
    expect(key).toBe(`${prefix}:{user:42}:ctl`);
    const before = await serverNow();
    await service.setOverride('user:42', 'reports', '100/m', {
      policy: 'daily',
      ttlMs: 60_000,
      reason: 'big export',
    });
    await service.setOverride('user:42', '*', '5/s', { ttlMs: 30_000, reason: 'all', burst: 10 });
    const after = await serverNow();
    const hash = await redis.hgetall(key);
    expect(Object.keys(hash).sort()).toEqual([
      'o:*:*',
      'o:reports:daily',
      'r:o:*:*',
      'r:o:reports:daily',
    ]);
    const [until, ...rest] = hash['o:reports:daily']!.split(':');
    expect(rest).toEqual(['100', '60000', '0']);
    expect(Number(until)).toBeGreaterThanOrEqual(before + 60_000);
    expect(Number(until)).toBeLessThanOrEqual(after + 60_000);
    expect(hash['o:*:*']!.split(':').slice(1)).toEqual(['5', '1000', '10']);
    expect(hash['r:o:reports:daily']).toBe('big export');
    // The shorter entry written second did not shorten the hash's life.
    const pttl = await redis.pttl(key);
    expect(pttl).toBeLessThanOrEqual(60_000);
    expect(pttl).toBeGreaterThanOrEqual(60_000 - ((await serverNow()) - before));
    await service.exempt('user:42', { ttlMs: 120_000, reason: 'incident' });
    expect(Number(await redis.hget(key, 'exempt'))).toBeGreaterThanOrEqual(before + 120_000);
    expect(await redis.hget(key, 'r:exempt')).toBe('incident');
    expect(await redis.pttl(key)).toBeGreaterThan(60_000);
    // Removing deletes the field and its reason.
    expect(await service.removeOverride('user:42', 'reports', { policy: 'daily' })).toBe(true);
    expect(Object.keys(await redis.hgetall(key)).sort()).toEqual([
      'exempt',
      'o:*:*',
      'r:exempt',
      'r:o:*:*',
    ]);
  });

  it('an entry ends on its own: a 1 ms override expires with its hash', async () => {
    const { prefix, service } = setup();
    await service.exempt('u', { ttlMs: 1, reason: 'tiny' });
    const key = controlKey(prefix, 'u');
    // PTTL is 1 or less, and the key is gone once the server clock passes it.
    const pttl = await redis.pttl(key);
    expect(pttl).toBeLessThanOrEqual(1);
    const listed = await service.listOverrides('u');
    expect(listed.overrides).toEqual([]);
    expect(listed.exemption === undefined || listed.exemption.expiresInMs <= 1).toBe(true);
  });

  it('an expired field is pruned by the next write; a reset deletes policy keys, never the control key', async () => {
    const { prefix, service } = setup();
    const key = controlKey(prefix, 'u');
    // An entry whose time has passed, as readers must ignore it.
    await redis.hset(key, 'o:*:*', '1000:5:1000:0', 'r:o:*:*', 'old');
    await redis.pexpire(key, 60_000);
    expect(await service.listOverrides('u')).toEqual({ overrides: [] });
    await service.exempt('u', { ttlMs: 60_000, reason: 'now' });
    expect(Object.keys(await redis.hgetall(key)).sort()).toEqual(['exempt', 'r:exempt']);
    // Exempt: a check spends nothing, so there is no policy key yet.
    expect((await service.check('u', { rate: '5/m' })).policies[0]).toMatchObject({
      exempt: true,
      remaining: 5,
    });
    expect(await service.reset('u')).toBe(0);
    await service.removeExemption('u');
    await service.setOverride('u', '*', '50/m', { ttlMs: 60_000, reason: 'kept' });
    await service.check('u', { rate: '5/m' });
    expect(await service.reset('u')).toBe(1);
    expect(await redis.exists(key)).toBe(1);
  });

  it('inspect on the server clock: a token bucket state within one-sided bounds', async () => {
    const { service } = setup();
    const start = await serverNow();
    await service.check('u', { rate: '10/s' }, { cost: 4 }); // 400 ms of debt
    const [entry] = await service.inspect('u', undefined, [{ rate: '10/s' }]);
    const elapsed = (await serverNow()) - start;
    expect(entry!.resetMs).toBeLessThanOrEqual(400);
    expect(entry!.resetMs).toBeGreaterThanOrEqual(400 - elapsed - 1);
    expect(entry!.remaining).toBe(6 + Math.floor((400 - entry!.resetMs) / 100));
    const tokens = (entry!.state as { tokens: number }).tokens;
    expect(tokens).toBeGreaterThanOrEqual(6);
    expect(tokens).toBeLessThanOrEqual(6 + (elapsed + 1) / 100);
  });

  it('a store without inspect or control gets a clear error', async () => {
    const store = { consume: () => Promise.resolve([]), deleteByPrefix: () => Promise.resolve(0) };
    const service = new RateLimitService(new RateLimiter({ store }));
    await expect(service.inspect('u')).rejects.toThrow(/implement RateLimitStore.inspect/);
    await expect(service.exempt('u', { ttlMs: 1, reason: 'r' })).rejects.toThrow(
      /implement RateLimitStore.control/,
    );
  });
});
