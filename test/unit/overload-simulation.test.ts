/**
 * Overload protection's targets at 2× capacity, proven on a discrete-event simulation of a
 * server (test/unit/overload-sim.ts): simulated time only, the real `OverloadProtection`
 * with its defaults (`overload: true`) deciding every call, but for the pool server's floor:
 * its calls queue on 4 connections, so it sets `minLimit: 4`, as the guide tells a process
 * with a small pool to (the default floor, 50, is a web server's burst from idle, far above
 * what 4 connections serve without a queue). Each run: 10 s at half the
 * capacity (unloaded), 10 s at 1×, 2× or 4× it, 10 s at half again (recovery); one call in
 * five critical, the rest sheddable, evenly spaced.
 *
 * The targets (at 2×): critical calls ≥ 99 % answered with a p99 ≤ 3× their unloaded p99;
 * goodput ≥ 90 % of capacity; the limit back to its unloaded value, and nothing shed, within
 * 5 s after the load drops; no swing on a steady load. Those not met are `it.failing`, with
 * the figures, so that the day they hold the suite says so.
 */
import { describe, expect, it } from '@jest/globals';
import type { OverloadOptions } from '../../lib/index.js';
import { runLoad, type Work } from './overload-sim.js';

/** The options a user sets per server: a pool of 4 connections takes a floor of 4. */
const OPTIONS: Record<Work, OverloadOptions> = { pool: { minLimit: 4 }, cpu: {} };

const runs = new Map<string, ReturnType<typeof runLoad>>();
function at(work: Work, load: number) {
  const key = `${work}×${load}`;
  let run = runs.get(key);
  if (run === undefined) runs.set(key, (run = runLoad(work, load, OPTIONS[work])));
  return run;
}

describe('overload protection on a simulated server (defaults)', () => {
  describe.each(['pool', 'cpu'] as const)('%s work', (work) => {
    it('below capacity (1×) sheds nothing and keeps the unloaded latency', () => {
      const r = at(work, 1);
      expect(r.goodputShare).toBeCloseTo(1, 2);
      expect(r.criticalOk).toBe(1);
      expect(r.sheddableOk).toBe(1);
      expect(r.criticalP99Ms).toBeCloseTo(r.unloadedCriticalP99Ms, 6);
      // Twice the peak in flight (the app-limited cap), at least the floor: the pool holds
      // up to 3 calls at half its capacity (floor 4); the cpu one 1 (floor 50).
      const [unloaded, loaded] = work === 'pool' ? [6, 6] : [50, 50];
      expect([r.unloadedLimit, r.loadedLimit]).toEqual([unloaded, loaded]);
    });

    it.each([2, 4])(
      'at %d×: every critical call answered, and the limit back to its unloaded value within 5 s',
      (load) => {
        const r = at(work, load);
        expect(r.criticalOk).toBe(1);
        expect(r.recoveryMs).toBeLessThanOrEqual(5000);
        expect(r.result.episodes.filter(([, started]) => started)).toHaveLength(1);
      },
    );

    it('at 2×: goodput ≥ 90 % of capacity', () => {
      expect(at(work, 2).goodputShare).toBeGreaterThanOrEqual(0.9);
    });
  });

  it('pool work: the figures per load', () => {
    const figures = [2, 4].map((load) => {
      const r = at('pool', load);
      const p99 = [ms(r.criticalP99Ms), ms(r.criticalSteadyP99Ms)];
      return [load, round(r.goodputShare), r.criticalOk, ...p99, r.recoveryMs];
    });
    // load, goodput / capacity, critical ok, critical p99 ms over the load and from its
    // second second on (unloaded: 5.15), recovery ms
    expect(figures).toEqual([
      [2, 1.001, 1, 13.3, 13.3, 100],
      [4, 1.001, 1, 13.9, 13.9, 100],
    ]);
    // Steady 2×: the limit holds within one of 9, the sheddable calls admitted per window
    // within 47 to 49: no swing.
    expect(at('pool', 2).steady.limit).toEqual([9, 10]);
    expect(at('pool', 2).steady.admittedSheddable).toEqual([47, 49]);
  });

  it('cpu work: the figures per load', () => {
    const figures = [2, 4].map((load) => {
      const r = at('cpu', load);
      const p99 = [ms(r.criticalP99Ms), ms(r.criticalSteadyP99Ms)];
      return [load, round(r.goodputShare), r.criticalOk, ...p99, ms(r.recoveryMs)];
    });
    // load, goodput / capacity, critical ok, critical p99 ms over the load and from its
    // second second on (unloaded: 2), recovery ms. At 4× the critical calls alone are 80 %
    // of the capacity and the sheddable ones' 503s 16 % more: the onset's queue never drains
    // (critical calls are never shed by the loop's signals, only at criticalCap).
    expect(figures).toEqual([
      [2, 0.949, 1, 92.5, 15.2, 170],
      [4, 0.854, 1, 508, 475.2, 319],
    ]);
  });

  // The onset the guide describes: before two busy windows have passed, nothing bounds the
  // turn, and the critical calls of the overload's first 330 ms wait more than 20 ms (127 ms
  // at most); none after.
  it('cpu work at 2×: the onset, the critical calls of the first 330 ms wait up to 127 ms', () => {
    const calls = at('cpu', 2).result.calls.filter(
      (c) => c.priority === 'critical' && c.at >= 10_000 && c.at < 20_000,
    );
    const slow = calls.filter((c) => c.latencyMs > 20);
    expect(ms(Math.max(...calls.map((c) => c.latencyMs)))).toBe(127);
    expect(Math.round(Math.max(...slow.map((c) => c.at)) - 10_000)).toBe(330);
  });

  it('cpu work at 2×: no swing on a steady load (admitted sheddable calls per window within ±25 %)', () => {
    const [low, high] = at('cpu', 2).steady.admittedSheddable;
    expect([low, high]).toEqual([28, 29]);
    expect(high - low).toBeLessThanOrEqual(0.5 * ((high + low) / 2));
  });

  it('cpu work at 2× with maxTurnMs below the handler (1 ms): every critical call answered, goodput ≥ 90 %, critical p99 92.5 ms over the load, 5.1 ms from its second second on', () => {
    const r = runLoad('cpu', 2, { maxTurnMs: 1 });
    expect([ms(r.criticalP99Ms), ms(r.criticalSteadyP99Ms)]).toEqual([92.5, 5.1]);
    expect(r.criticalOk).toBe(1);
    expect(r.goodputShare).toBeGreaterThanOrEqual(0.9);
  });

  // In the simulation the steady state meets the target once a turn holds no more than one
  // handler's work past the first call: a critical call then waits out at most the turn it
  // arrives in and its place in the next. The benchmark on a real app did not bear it out
  // (a real turn holds more than the handlers): the guide keeps the default.
  it('cpu work at 2× with maxTurnMs below the handler (1 ms): steady-state critical p99 ≤ 3× the unloaded p99', () => {
    const r = runLoad('cpu', 2, { maxTurnMs: 1 });
    expect(r.criticalSteadyP99Ms).toBeLessThanOrEqual(3 * r.unloadedCriticalP99Ms);
  });

  // With the default budget (5 ms) a turn holds about 5 ms of admitted work plus one 2 ms
  // handler past it: 15.2 ms against 6.
  it.failing('cpu work at 2× (defaults): steady-state critical p99 ≤ 3× the unloaded p99', () => {
    const r = at('cpu', 2);
    expect(r.criticalSteadyP99Ms).toBeLessThanOrEqual(3 * r.unloadedCriticalP99Ms);
  });

  // The turn's budget applies only once two windows in a row have seen the loop busy
  // (utilisation above 0.9): the load steps from half the capacity (utilisation 0.5) to twice
  // it at a window's start, so for those two windows (200 ms) nothing bounds the turn and a
  // queue of about 200 ms builds in the sockets, which the critical calls then wait out; with
  // the budget on from the first call (before it was gated) the p99 was 5.1 ms. The price of
  // never shedding an idle process's burst.
  it.failing(
    'cpu work at 2× with maxTurnMs below the handler (1 ms): critical p99 ≤ 3× the unloaded p99',
    () => {
      const r = runLoad('cpu', 2, { maxTurnMs: 1 });
      expect(r.criticalP99Ms).toBeLessThanOrEqual(3 * r.unloadedCriticalP99Ms);
    },
  );

  // The overload starts from twice the light load's peak (6), not from a limit it never
  // filled, and Gradient2 climbs from there to where latency is its tolerance (1.5×) plus
  // its headroom above the unloaded one, about 2.25× at a limit of 9: 13.3 ms against 15.45.
  it('pool work at 2×: critical p99 ≤ 3× the unloaded p99', () => {
    const r = at('pool', 2);
    expect(r.criticalP99Ms).toBeLessThanOrEqual(3 * r.unloadedCriticalP99Ms);
  });

  // The turn's budget (maxTurnMs, 5 ms) sheds a sheddable call once the turn has run 5 ms,
  // once two windows have seen the loop busy: the overload's first 200 ms build a queue (see
  // above), then a turn holds about 5 ms of admitted work plus one 2 ms handler past it, and
  // a critical call waits out the turn it arrives in, then its place in the next: 92.5 ms
  // against 6 ms (15.3 ms while the budget applied from the first call).
  it.failing('cpu work at 2×: critical p99 ≤ 3× the unloaded p99', () => {
    const r = at('cpu', 2);
    expect(r.criticalP99Ms).toBeLessThanOrEqual(3 * r.unloadedCriticalP99Ms);
  });
});

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}

/** A latency to 0.1 ms: the simulation's sums of fractional ms carry float noise. */
function ms(n: number): number {
  return Math.round(n * 10) / 10;
}
