/**
 * The sliding log's own cases, part of the conformance suite: each hit expires exactly one
 * period after it, on every store, with an injected clock.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { only, setup } from './suite.js';
import { countedDown, type StoreKind } from './stores.js';

/** `[allowed, remaining, resetMs, retryAfterMs]` of one policy's decision. */
type Answer = [boolean, number, number, number];

export function slidingLogSuite(makeKind: () => StoreKind): void {
  const kind = makeKind();
  afterAll(() => kind.close());

  describe('sliding-log: exact per-hit expiry', () => {
    it("the throttler's case: 2 per 1000 ms, hits at 0, 900, 1050, 1060, 1070 → 200 200 200 429 429", async () => {
      const { clock, limiter } = setup(kind);
      const p = { rate: { limit: 2, periodMs: 1000 }, algorithm: 'sliding-log' } as const;
      const start = clock.now;
      const answers: Answer[] = [];
      for (const at of [0, 900, 1050, 1060, 1070]) {
        clock.now = start + at;
        const d = only(await limiter.consume('tess', p));
        answers.push([d.allowed, d.remaining, d.resetMs, d.retryAfterMs]);
      }
      expect(answers).toEqual([
        [true, 1, 1000, 0],
        [true, 0, 1000, 0],
        // The hit at 0 expired at 1000: one hit (900) in the window.
        [true, 0, 1000, 0],
        // Full until the hit at 900 expires, at 1900; back to full at 2050.
        [false, 0, 990, 840],
        [false, 0, 980, 830],
      ]);
    });

    it('costs above 1 log one hit per unit, and the oldest units expire first', async () => {
      const { clock, limiter } = setup(kind);
      const p = { rate: '5/10s', algorithm: 'sliding-log' } as const;
      const start = clock.now;
      const step = async (at: number, cost: number): Promise<Answer> => {
        clock.now = start + at;
        const d = only(await limiter.consume('uma', p, { cost }));
        return [d.allowed, d.remaining, d.resetMs, d.retryAfterMs];
      };
      expect(await step(0, 2)).toEqual([true, 3, 10_000, 0]);
      expect(await step(3000, 2)).toEqual([true, 1, 10_000, 0]);
      // 4 logged: 2 more must wait for one unit of the hit at 0, at 10,000.
      expect(await step(6000, 2)).toEqual([false, 1, 7000, 4000]);
      expect(await step(6000, 1)).toEqual([true, 0, 10_000, 0]);
      expect(await step(9999, 1)).toEqual([false, 0, 6001, 1]);
      // Both units of 0 expire together: 3000, 3000, 6000 are left.
      expect(await step(10_000, 2)).toEqual([true, 0, 10_000, 0]);
      expect(await step(10_000, 1)).toEqual([false, 0, 10_000, 3000]);
    });

    it('the log holds at most `limit` entries, and its key lives one period after the newest', async () => {
      const { clock, limiter, fixture, keyOf } = setup(kind);
      const p = { rate: '3/2s', algorithm: 'sliding-log' } as const;
      let admitted = 0;
      for (let i = 0; i < 60; i++) {
        clock.now += 150;
        if ((await limiter.consume('vic', p)).allowed) admitted++;
        const raw = (await fixture.raw(keyOf('vic', p))) ?? '';
        // Every entry is a 13-digit time in ms, in either store's form.
        expect((raw.match(/\d{13}/g) ?? []).length).toBeLessThanOrEqual(3);
      }
      // One request every 150 ms until 9000: each hit frees its unit 2000 ms later, taken by
      // the next request at or after that: 150-450, 2250-2550, 4350-4650, 6450-6750, 8550-8850.
      expect(admitted).toBe(15);
      clock.now += 5000;
      const sent = performance.now();
      const d = only(await limiter.consume('vic', p));
      expect([d.allowed, d.resetMs]).toEqual([true, 2000]);
      const ttl = await fixture.pttl(keyOf('vic', p));
      expect(ttl).toBeLessThanOrEqual(2000);
      expect(ttl).toBeGreaterThanOrEqual(2000 - countedDown(kind, sent));
    });

    it('a refund of hits that have expired gives nothing, though newer hits keep the log', async () => {
      // Both stores gave back 1 here: the expired hit was taken out of the live log.
      const { clock, limiter } = setup(kind);
      const p = { rate: '5/m', algorithm: 'sliding-log' } as const;
      const { spending } = await limiter.spend([{ identity: 'rf', policy: p }]);
      clock.now += 30_000;
      await limiter.consume('rf', p);
      clock.now += 30_100;
      expect(await limiter.refund(spending!)).toBe(0);
      expect(only(await limiter.peek('rf', p)).remaining).toBe(4);
    });

    it('a clock that steps back logs its hit no earlier than the newest one', async () => {
      const { clock, limiter } = setup(kind);
      const p = { rate: '2/s', algorithm: 'sliding-log' } as const;
      const T = clock.now;
      expect((await limiter.consume('wes', p)).allowed).toBe(true);
      clock.now = T - 300;
      const back = only(await limiter.consume('wes', p));
      // Logged at T, not T - 300: expires at T + 1000, 1300 ms from the clock's reading.
      expect([back.allowed, back.remaining, back.resetMs]).toEqual([true, 0, 1300]);
      clock.now = T + 999;
      expect((await limiter.consume('wes', p)).allowed).toBe(false);
      clock.now = T + 1000;
      expect(only(await limiter.consume('wes', p, { cost: 2 })).allowed).toBe(true);
    });
  });
}
