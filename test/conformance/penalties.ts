/**
 * Penalties (`block` on a policy, issue 15), part of the conformance suite: the same rules
 * on every store, with an injected clock.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { RateLimitService, type Decision } from '../../lib/index.js';
import { ALGORITHMS } from '../../lib/core/model/policy.js';
import { setup } from './suite.js';
import { countedDown, type StoreKind } from './stores.js';

const MINUTE = 60_000;
const BLOCK = 15 * MINUTE;

function only(decision: Decision) {
  expect(decision.policies).toHaveLength(1);
  return decision.policies[0]!;
}

export function penaltySuite(makeKind: () => StoreKind): void {
  const kind = makeKind();
  afterAll(() => kind.close());
  // RateLimitService logs each exemption and override: not this suite's subject.
  beforeAll(() => Logger.overrideLogger(false));

  it('blockResets: a block shorter than the period ends with a fresh budget (the throttler meaning), without it the spent state outlives the block', async () => {
    const { clock, limiter } = setup(kind);
    const short = { rate: '2/10s', algorithm: 'fixed-window', block: 5000 } as const;
    for (const [id, p, after] of [
      ['fresh', { ...short, blockResets: true }, 1],
      ['kept', short, 0],
    ] as const) {
      for (let i = 0; i < 3; i++) await limiter.consume(id, p);
      clock.now += 5000;
      const d = only(await limiter.consume(id, p));
      expect([id, d.allowed, d.remaining]).toEqual([id, after === 1, after === 1 ? 1 : 0]);
      clock.now -= 5000;
    }
  });

  it('blockResets: the refusal that starts the block waits for the block (2 s), not the rest of the window (60 s): the window is gone', async () => {
    // The throttler's { ttl: 60000, limit: 1, blockDuration: 2000 }: 6.7.1 answers Retry-After: 2.
    const { clock, limiter } = setup(kind);
    const p = {
      rate: { limit: 1, periodMs: MINUTE },
      algorithm: 'fixed-window',
      block: 2000,
      blockResets: true,
    } as const;
    expect(only(await limiter.consume('ra', p)).allowed).toBe(true);
    clock.now += 100;
    const starts = only(await limiter.consume('ra', p));
    expect(starts).toMatchObject({ allowed: false, blocked: true, retryAfterMs: 2000 });
    clock.now += 1100;
    expect(only(await limiter.consume('ra', p))).toMatchObject({
      allowed: false,
      retryAfterMs: 900,
    });
    clock.now += 900;
    expect(only(await limiter.consume('ra', p)).allowed).toBe(true);
    // Without blockResets the window's state stays: the wait is the longer, the window's.
    const kept = { ...p, blockResets: false };
    await limiter.consume('kept', kept);
    expect(only(await limiter.consume('kept', kept)).retryAfterMs).toBe(MINUTE);
  });

  describe.each(ALGORITHMS)('penalties: %s', (algorithm) => {
    const policy = { rate: '5/m', algorithm, block: '15m' } as const;

    it('5/m with block 15m: the 6th request is refused for 900 s; 100 more refusals do not move the end; reset lifts it', async () => {
      const { clock, limiter, fixture, keyOf } = setup(kind);
      for (let i = 0; i < 5; i++) expect((await limiter.consume('pen', policy)).allowed).toBe(true);
      const sent = performance.now();
      const sixth = only(await limiter.consume('pen', policy));
      expect(sixth).toMatchObject({ allowed: false, blocked: true, retryAfterMs: BLOCK });
      // The block is a key of its own whose TTL is the block, less what Redis counted down since.
      const ttl = await fixture.pttl(`${keyOf('pen', policy)}:b`);
      expect(ttl).toBeGreaterThanOrEqual(BLOCK - countedDown(kind, sent));
      expect(ttl).toBeLessThanOrEqual(BLOCK);
      for (let i = 1; i <= 100; i++) {
        clock.now += 1000;
        const d = only(await limiter.consume('pen', policy));
        expect(d).toMatchObject({ allowed: false, blocked: true, remaining: 0 });
        expect(d.retryAfterMs).toBe(BLOCK - i * 1000);
      }
      // By now (100 s on) the rate alone would admit: only the block refuses.
      expect(await limiter.reset('pen')).toBeGreaterThanOrEqual(1);
      expect(await fixture.pttl(`${keyOf('pen', policy)}:b`)).toBe(-2);
      expect(only(await limiter.consume('pen', policy))).toMatchObject({ allowed: true });
    });

    it('the block ends when it was set to: refused 1 ms before, admitted at its end', async () => {
      const { clock, limiter } = setup(kind);
      for (let i = 0; i < 6; i++) await limiter.consume('end', policy);
      clock.now += BLOCK - 1;
      expect(only(await limiter.consume('end', policy))).toMatchObject({
        allowed: false,
        retryAfterMs: 1,
      });
      clock.now += 1;
      expect(only(await limiter.consume('end', policy)).allowed).toBe(true);
    });

    it('extendBlock: a refusal during the block starts it again', async () => {
      const { clock, limiter } = setup(kind);
      const p = { ...policy, extendBlock: true };
      for (let i = 0; i < 6; i++) await limiter.consume('ext', p);
      clock.now += 10 * MINUTE;
      expect(only(await limiter.consume('ext', p)).retryAfterMs).toBe(BLOCK);
      clock.now += BLOCK - 1;
      expect(only(await limiter.consume('ext', p)).retryAfterMs).toBe(BLOCK);
      // A peek reports the block without moving it.
      clock.now += 1000;
      expect(only(await limiter.peek('ext', p))).toMatchObject({
        allowed: false,
        retryAfterMs: BLOCK - 1000,
      });
    });

    it('inspect shows the block and what is left of it, even once the state has expired; reset clears it', async () => {
      const { clock, limiter } = setup(kind);
      for (let i = 0; i < 6; i++) await limiter.consume('ins', policy);
      clock.now += 1000;
      expect(await limiter.inspect('ins', { policies: [policy] })).toEqual([
        expect.objectContaining({
          policy: 'default',
          algorithm,
          blockedMs: BLOCK - 1000,
          blockedUntilMs: clock.now - 1000 + BLOCK,
        }),
      ]);
      // Three periods on, the rate's state is empty or gone; the block is still there.
      clock.now += 3 * MINUTE;
      const [later] = await limiter.inspect('ins', { policies: [policy] });
      expect(later).toMatchObject({ blockedMs: BLOCK - 1000 - 3 * MINUTE, remaining: 5 });
      await limiter.reset('ins');
      expect(await limiter.inspect('ins', { policies: [policy] })).toEqual([]);
    });

    it('a peek starts no block and a cost 0 request writes nothing', async () => {
      const { limiter, fixture, keyOf } = setup(kind);
      for (let i = 0; i < 5; i++) await limiter.consume('pk', policy);
      expect(only(await limiter.peek('pk', policy))).toMatchObject({ allowed: true, remaining: 0 });
      expect(await fixture.pttl(`${keyOf('pk', policy)}:b`)).toBe(-2);
    });
  });

  describe('penalties with stacked policies and operators', () => {
    const login = { name: 'login', rate: '1/m', block: '15m' } as const;
    const daily = { name: 'daily', rate: '100/d' } as const;

    it('a block refuses the whole request and spends nothing of the other policy', async () => {
      const { clock, limiter } = setup(kind);
      expect((await limiter.consume('st', [login, daily])).allowed).toBe(true);
      const refused = await limiter.consume('st', [login, daily]);
      expect(refused.policies.map((p) => [p.name, p.allowed, p.retryAfterMs])).toEqual([
        ['login', false, BLOCK],
        ['daily', true, 0],
      ]);
      clock.now += MINUTE;
      const blocked = await limiter.consume('st', [login, daily]);
      expect(blocked.policies[0]).toMatchObject({ allowed: false, retryAfterMs: BLOCK - MINUTE });
      expect((await limiter.peek('st', daily)).policies[0]!.remaining).toBe(99);
    });

    it('a refusal by another policy starts no block', async () => {
      const { clock, limiter } = setup(kind);
      const tight = { name: 'tight', rate: '1/h' } as const;
      const loose = { name: 'loose', rate: '5/m', block: '15m' } as const;
      await limiter.consume('ot', [tight, loose]);
      const d = await limiter.consume('ot', [tight, loose]);
      expect(d.policies.map((p) => [p.name, p.allowed, p.blocked])).toEqual([
        ['tight', false, undefined],
        ['loose', true, undefined],
      ]);
      clock.now += 3_600_000;
      expect((await limiter.consume('ot', [tight, loose])).allowed).toBe(true);
    });

    it('a block starts when policies of different identities refuse (on Cluster: decided first)', async () => {
      const { limiter } = setup(kind);
      const request = [
        { identity: 'ip:203.0.113.9', policy: login },
        { identity: 'user:kai', policy: daily },
      ];
      expect((await limiter.consumeEach(request)).allowed).toBe(true);
      const d = await limiter.consumeEach(request);
      expect(d.policies[0]).toMatchObject({ allowed: false, blocked: true, retryAfterMs: BLOCK });
      expect((await limiter.consume('ip:203.0.113.9', login)).policies[0]!.retryAfterMs).toBe(
        BLOCK,
      );
      expect((await limiter.peek('user:kai', daily)).policies[0]!.remaining).toBe(99);
    });

    it('an exemption lifts the block, and so does an override', async () => {
      const { clock, limiter } = setup(kind);
      const service = new RateLimitService(limiter);
      await limiter.consume('ex', login);
      expect(only(await limiter.consume('ex', login)).blocked).toBe(true);
      // Two minutes on, the rate alone would admit: only the block refuses.
      clock.now += 2 * MINUTE;
      expect(only(await limiter.consume('ex', login)).blocked).toBe(true);
      await service.exempt('ex', { ttlMs: MINUTE, reason: 'support ticket' });
      expect(only(await limiter.consume('ex', login))).toMatchObject({
        allowed: true,
        exempt: true,
      });
      await service.removeExemption('ex');
      expect(only(await limiter.consume('ex', login)).allowed).toBe(true);
      // Blocked again by the next refusal; an override lifts that block too.
      expect(only(await limiter.consume('ex', login)).retryAfterMs).toBe(BLOCK);
      clock.now += 2 * MINUTE;
      await service.setOverride('ex', '*', '10/m', { ttlMs: MINUTE, reason: 'load test' });
      expect(only(await limiter.consume('ex', login))).toMatchObject({ allowed: true, limit: 10 });
      await service.removeOverride('ex', '*');
      expect(only(await limiter.consume('ex', login)).allowed).toBe(true);
    });
  });
}
