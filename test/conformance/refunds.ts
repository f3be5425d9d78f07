/**
 * Refunds (`count: 'failed' | 'succeeded'`, issue 15), part of the conformance suite: the
 * same rules on every store and algorithm, with an injected clock.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { type Decision } from '../../lib/index.js';
import { ALGORITHMS } from '../../lib/core/model/policy.js';
import { setup } from './suite.js';
import type { StoreKind } from './stores.js';

function only(decision: Decision) {
  expect(decision.policies).toHaveLength(1);
  return decision.policies[0]!;
}

export function refundSuite(makeKind: () => StoreKind): void {
  const kind = makeKind();
  afterAll(() => kind.close());

  describe.each(ALGORITHMS)('refunds: %s', (algorithm) => {
    const policy = { rate: '5/m', algorithm } as const;
    const entry = (identity: string) => [{ identity, policy }];

    it('a refund gives back exactly what the request spent', async () => {
      const { limiter } = setup(kind);
      await limiter.consume('r1', policy, { cost: 2 });
      const { decision, spending } = await limiter.spend(entry('r1'), { cost: 2 });
      expect(only(decision).remaining).toBe(1);
      expect(await limiter.refund(spending!)).toBe(1);
      expect(only(await limiter.peek('r1', policy)).remaining).toBe(3);
    });

    it('a refund never takes the state below empty, even when given twice', async () => {
      const { limiter, fixture, keyOf } = setup(kind);
      const { spending } = await limiter.spend(entry('r2'));
      expect(await limiter.refund(spending!)).toBe(1);
      expect(await limiter.refund(spending!)).toBe(0);
      expect(only(await limiter.peek('r2', policy)).remaining).toBe(5);
      // Nothing owed: the buckets delete their key, the windows keep a zero count.
      const ttl = await fixture.pttl(keyOf('r2', policy));
      if (algorithm === 'token-bucket' || algorithm === 'gcra') expect(ttl).toBe(-2);
      else expect(ttl).toBeGreaterThan(0);
    });

    it('a refund after the window (or the refill) has passed gives nothing of the new one', async () => {
      const { clock, limiter } = setup(kind);
      const { spending } = await limiter.spend(entry('r3'));
      // Two periods on, whatever was spent has come back by itself.
      clock.now += 120_000;
      for (let i = 0; i < 3; i++) await limiter.consume('r3', policy);
      await limiter.refund(spending!);
      expect(only(await limiter.peek('r3', policy)).remaining).toBe(2);
    });

    it('a refund once its window has passed gives nothing, even before another opens', async () => {
      // On Redis with a test clock the key outlives the window on Redis' own clock: the
      // refund must still see the window over (it once gave back there, and not in memory:
      // the fixed window, then the sliding log 1 and the sliding window 1 where memory gave 0).
      // The sliding window's spent window counts through the next one, as the previous window.
      const { clock, limiter } = setup(kind);
      await limiter.consume('r5', policy, { cost: 2 });
      const { spending } = await limiter.spend(entry('r5'));
      clock.now += (algorithm === 'sliding-window' ? 120_000 : 60_000) + 100;
      const given = await limiter.refund(spending!);
      // Token bucket and GCRA: the refill has repaid it all; a window: it has ended.
      expect(given).toBe(0);
      expect(only(await limiter.peek('r5', policy)).remaining).toBe(5);
    });

    it('nothing is spent, so nothing is given back, by a denied request', async () => {
      const { limiter } = setup(kind);
      await limiter.consume('r4', policy, { cost: 5 });
      const { decision, spending } = await limiter.spend(entry('r4'));
      expect(decision.allowed).toBe(false);
      expect(spending).toBeUndefined();
    });
  });

  describe('refunds of a sliding window', () => {
    const policy = { rate: '5/m', algorithm: 'sliding-window' } as const;

    it('the window spent in is given back while it counts as the previous one, not after', async () => {
      // Spent in window m, spent again in m + 1 (which keeps m's count as the previous one):
      // a refund in m + 1 gives back, one at (m + 2)·P gave 1 of a count that no longer counts.
      const { clock, limiter } = setup(kind);
      const first = await limiter.spend([{ identity: 'sw1', policy }]);
      const second = await limiter.spend([{ identity: 'sw1', policy }]);
      clock.now += 60_000;
      await limiter.consume('sw1', policy);
      expect(await limiter.refund(first.spending!)).toBe(1);
      clock.now += 60_000;
      expect(await limiter.refund(second.spending!)).toBe(0);
      expect(only(await limiter.peek('sw1', policy)).remaining).toBe(4);
    });
  });

  describe('refunds of stacked policies', () => {
    const burst = { name: 'burst', rate: '3/m' } as const;
    const daily = { name: 'daily', rate: '10/d', algorithm: 'fixed-window' } as const;

    it('burst + daily are refunded together, in one call; a chosen entry alone too', async () => {
      const { limiter } = setup(kind);
      const entries = [
        { identity: 'ip:198.51.100.1', policy: burst },
        { identity: 'ip:198.51.100.1', policy: daily },
      ];
      const { spending } = await limiter.spend(entries);
      expect(await limiter.refund(spending!)).toBe(2);
      const left = await limiter.peek('ip:198.51.100.1', [burst, daily]);
      expect(left.policies.map((p) => p.remaining)).toEqual([3, 10]);
      const again = await limiter.spend(entries);
      expect(await limiter.refund(again.spending!, [1])).toBe(1);
      const after = await limiter.peek('ip:198.51.100.1', [burst, daily]);
      expect(after.policies.map((p) => p.remaining)).toEqual([2, 10]);
    });

    it('policies of different identities are refunded per identity (Cluster: one call each)', async () => {
      const { limiter } = setup(kind);
      const { spending } = await limiter.spend([
        { identity: 'ip:198.51.100.2', policy: burst },
        { identity: 'user:ada', policy: daily },
      ]);
      expect(await limiter.refund(spending!)).toBe(2);
      expect(only(await limiter.peek('user:ada', daily)).remaining).toBe(10);
    });
  });
}
