/**
 * Concurrency limits (`{ concurrent, leaseMs }`, issue 15), part of the conformance suite:
 * the same rules on every store, with an injected clock.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { ALGORITHMS } from '../../lib/core/model/policy.js';
import { policyKey } from '../../lib/core/model/store-keys.js';
import { only, setup } from './suite.js';
import type { StoreKind } from './stores.js';

const LEASE = 1500;
const slots = { name: 'inflight', concurrent: 3, leaseMs: LEASE } as const;

export function concurrencySuite(makeKind: () => StoreKind): void {
  const kind = makeKind();
  afterAll(() => kind.close());

  describe('concurrency limits', () => {
    it('takes up to N slots; the N+1th request is refused with a wait of 1000 ms and takes nothing', async () => {
      const { limiter, fixture } = setup(kind);
      const remaining: number[] = [];
      for (let i = 0; i < 3; i++) {
        const d = await limiter.consume('c1', slots);
        expect(d.allowed).toBe(true);
        expect(d.leases).toHaveLength(1);
        expect(only(d).resetMs).toBe(LEASE);
        remaining.push(only(d).remaining);
      }
      expect(remaining).toEqual([2, 1, 0]);
      const refused = await limiter.consume('c1', slots);
      expect(refused.leases).toBeUndefined();
      expect(only(refused)).toMatchObject({
        allowed: false,
        limit: 3,
        remaining: 0,
        retryAfterMs: 1000,
      });
      // The lease set carries a TTL no longer than the lease.
      const key = policyKey(limiter.prefix, 'c1', 'global', 'inflight', 'cc');
      const ttl = await fixture.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(LEASE);
    });

    it('a release frees the slot; releasing twice frees it once', async () => {
      const { limiter } = setup(kind);
      const held = [];
      for (let i = 0; i < 3; i++) held.push((await limiter.consume('c2', slots)).leases!);
      expect((await limiter.consume('c2', slots)).allowed).toBe(false);
      expect(await limiter.release(held[0]!)).toBe(1);
      expect(await limiter.release(held[0]!)).toBe(0);
      const again = await limiter.consume('c2', slots);
      expect(only(again)).toMatchObject({ allowed: true, remaining: 0 });
      expect((await limiter.consume('c2', slots)).allowed).toBe(false);
    });

    it('a slot never given back expires after leaseMs on the store clock: refused 1 ms before, admitted at its end', async () => {
      const { limiter, clock } = setup(kind);
      for (let i = 0; i < 3; i++) await limiter.consume('c3', slots);
      clock.now += LEASE - 1;
      expect(only(await limiter.consume('c3', slots)).allowed).toBe(false);
      clock.now += 1;
      const after = await limiter.consume('c3', slots);
      expect(only(after)).toMatchObject({ allowed: true, remaining: 2 });
    });

    it('a peek takes no slot', async () => {
      const { limiter } = setup(kind);
      await limiter.consume('c4', slots);
      expect(only(await limiter.peek('c4', slots))).toMatchObject({ allowed: true, remaining: 2 });
      expect(only(await limiter.consume('c4', slots)).remaining).toBe(1);
    });

    describe.each(ALGORITHMS)('stacked with a %s rate, all-or-nothing', (algorithm) => {
      const rate = { name: 'rate', rate: '2/m', algorithm } as const;

      it('a request the rate refuses takes no slot', async () => {
        const { limiter } = setup(kind);
        expect((await limiter.consume('s1', [rate, slots])).allowed).toBe(true);
        expect((await limiter.consume('s1', [rate, slots])).allowed).toBe(true);
        const refused = await limiter.consume('s1', [rate, slots]);
        expect(refused.allowed).toBe(false);
        expect(refused.leases).toBeUndefined();
        // Two slots held by the two admitted requests, none by the refused one.
        expect(only(await limiter.peek('s1', slots)).remaining).toBe(1);
      });

      it('a request refused for lack of a slot spends no rate', async () => {
        const { limiter } = setup(kind);
        const one = { ...slots, concurrent: 1 };
        expect((await limiter.consume('s2', [rate, one])).allowed).toBe(true);
        const refused = await limiter.consume('s2', [rate, one]);
        expect(refused.policies.map((p) => p.allowed)).toEqual([true, false]);
        expect(only(await limiter.peek('s2', rate)).remaining).toBe(1);
      });
    });

    it('inspect shows the slots held and when each lease expires; reset gives them all back', async () => {
      const { limiter, clock } = setup(kind);
      await limiter.consume('c6', slots);
      clock.now += 100;
      await limiter.consume('c6', slots);
      const [entry, ...others] = await limiter.inspect('c6', { policies: [slots] });
      expect(others).toEqual([]);
      expect(entry).toMatchObject({
        scope: 'global',
        policy: 'inflight',
        algorithm: 'concurrency',
        resetMs: LEASE,
        limit: 3,
        remaining: 1,
        state: { held: 2, leaseExpiriesMs: [clock.now - 100 + LEASE, clock.now + LEASE] },
      });
      // Unknown policies still show what is held.
      expect((await limiter.inspect('c6'))[0]!.state).toEqual(entry!.state);
      expect(await limiter.reset('c6')).toBe(1);
      expect(await limiter.inspect('c6')).toEqual([]);
      expect(only(await limiter.consume('c6', slots)).remaining).toBe(2);
    });

    it('an exempt identity takes no slot', async () => {
      const { limiter, fixture } = setup(kind);
      if (fixture.store.control) {
        await fixture.store.control!(`${limiter.prefix}:{c5}:ctl`, {
          op: 'set',
          field: 'exempt',
          ttlMs: 60_000,
          reason: 'test',
        });
      }
      const d = await limiter.consume('c5', slots);
      expect(d.allowed).toBe(true);
      expect(d.leases).toBeUndefined();
      expect(only(d).exempt).toBe(true);
    });
  });
}
