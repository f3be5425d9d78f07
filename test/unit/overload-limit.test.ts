/**
 * The adaptive concurrency limit (Gradient2 over sample windows) on synthetic series: each
 * window is fed its latencies and in-flight counts, then closed; no clock, no timer.
 */
import { describe, expect, it } from '@jest/globals';
import { Gradient2Limit } from '../../lib/core/overload/gradient.js';
import { overloadSettings } from '../../lib/core/overload/options.js';
import type { OverloadOptions } from '../../lib/index.js';

/** A limiter with a floor of 5 unless `options` say otherwise, low enough to watch it move. */
function limiter(options: OverloadOptions = {}): Gradient2Limit {
  return new Gradient2Limit(overloadSettings({ minLimit: 5, ...options })!.pool);
}

/** Closes `windows` windows of 20 calls each at `rttMs`, the limit full; the limits after each. */
function run(g: Gradient2Limit, windows: number, rttMs: number, delayMs?: number): number[] {
  return runWanting(g, windows, rttMs, Infinity, delayMs);
}

/**
 * Closes `windows` windows of 20 calls each at `rttMs`, with `want` calls wanting in (as
 * many in flight as the limit lets in); the limits after each.
 */
function runWanting(
  g: Gradient2Limit,
  windows: number,
  rttMs: number,
  want: number,
  delayMs?: number,
): number[] {
  const limits: number[] = [];
  for (let w = 0; w < windows; w++) {
    for (let i = 0; i < 20; i++) g.sample(rttMs, Math.min(want, g.limit));
    limits.push(g.update(delayMs));
  }
  return limits;
}

describe('Gradient2Limit', () => {
  it('lowers the limit while latency rises above the tolerance, window after window', () => {
    const g = limiter({ initialLimit: 100, maxLimit: 100 });
    expect(run(g, 50, 10).at(-1)).toBe(100);
    const rising = run(g, 10, 40);
    expect(rising[0]).toBe(92);
    for (let i = 1; i < rising.length; i++) expect(rising[i]!).toBeLessThan(rising[i - 1]!);
    expect(rising.at(-1)).toBe(45);
  });

  it('raises it again once latency is back, to the ceiling', () => {
    const g = limiter({ initialLimit: 100, maxLimit: 100 });
    run(g, 50, 10);
    const low = run(g, 20, 40).at(-1)!;
    expect(low).toBeLessThan(30);
    const recovering = run(g, 100, 10);
    for (let i = 1; i < recovering.length; i++)
      expect(recovering[i]!).toBeGreaterThanOrEqual(recovering[i - 1]!);
    // 100 windows of 100 ms: back within 10 s.
    expect(recovering.at(-1)).toBe(100);
    expect(recovering.findIndex((l) => l === 100)).toBeLessThan(60);
  });

  it('holds the floor however high latency goes, and the ceiling however long it stays low', () => {
    const g = limiter({ initialLimit: 50, minLimit: 8, maxLimit: 64 });
    run(g, 20, 10);
    const high = run(g, 200, 10_000);
    expect(Math.min(...high)).toBe(8);
    expect(high.at(-1)).toBe(8);
    const low = run(g, 2000, 1);
    expect(Math.max(...low)).toBe(64);
    expect(low.at(-1)).toBe(64);
  });

  it('does not oscillate on a steady load: the limit settles and stays', () => {
    const g = limiter({ initialLimit: 20 });
    const limits: number[] = [];
    // 30 calls in flight at 10 ms, whatever the limit: it grows by its whole headroom while
    // full at the usual latency, then, once 30 no longer reach it, settles at twice the peak.
    for (let w = 0; w < 1000; w++) {
      for (let i = 0; i < 20; i++) g.sample(10, 30);
      limits.push(g.update());
    }
    expect(limits.slice(0, 8)).toEqual([24, 29, 34, 47, 53, 56, 58, 60]);
    expect(new Set(limits.slice(8))).toEqual(new Set([60]));
  });

  it('keeps the limit where latency grows with concurrency past a capacity (a queue)', () => {
    const g = limiter({ initialLimit: 20 });
    const limits: number[] = [];
    for (let w = 0; w < 600; w++) {
      const inFlight = g.limit;
      // 50 calls at once cost 10 ms each; more wait their turn.
      for (let i = 0; i < 20; i++) g.sample(10 * Math.max(1, inFlight / 50), inFlight);
      limits.push(g.update());
    }
    const last = limits.slice(-300);
    // Within 1.5 to 2 times the capacity (Gradient2's tolerance plus its headroom), with no
    // swing: over the last 30 s of windows it only creeps, by at most 1 per window and 10 in all.
    expect(Math.min(...last)).toBeGreaterThanOrEqual(75);
    expect(Math.max(...last)).toBeLessThanOrEqual(100);
    expect(Math.max(...last) - Math.min(...last)).toBeLessThanOrEqual(10);
    for (let i = 1; i < last.length; i++)
      expect(Math.abs(last[i]! - last[i - 1]!)).toBeLessThanOrEqual(1);
  });

  it('lowers the limit by eventLoopBackoff per window while the event loop is late, to the floor', () => {
    const g = limiter({ initialLimit: 100, maxLimit: 100, minLimit: 10 });
    run(g, 20, 10);
    expect(run(g, 3, 10, 49)).toEqual([100, 100, 100]);
    expect(run(g, 3, 10, 51)).toEqual([90, 81, 72]);
    expect(run(g, 40, 10, 500).at(-1)).toBe(10);
    // Not watched: no delay lowers it.
    const unwatched = limiter({ initialLimit: 100, maxLimit: 100, maxEventLoopDelayMs: false });
    expect(run(unwatched, 3, 10, 10_000)).toEqual([100, 100, 100]);
  });

  it('comes down to twice the peak in flight of the last 10 windows when the load does not reach it (app-limited), and keeps it while too few calls are in flight to judge a slow latency', () => {
    const g = limiter({ initialLimit: 100, maxLimit: 200 });
    expect(runWanting(g, 3, 10, 40)).toEqual([80, 80, 80]);
    // The peak of 40 is remembered for 10 windows, then the cap is 2 × 10.
    expect(runWanting(g, 12, 10, 10)).toEqual([80, 80, 80, 80, 80, 80, 80, 80, 80, 20, 20, 20]);
    expect(runWanting(g, 5, 100, 5)).toEqual([20, 20, 20, 20, 20]);
    // A window without a call counts a peak of 0: an idle process is at the floor.
    const idle = limiter();
    expect(idle.update()).toBe(5);
  });

  it('opens up from the floor by its whole headroom per window while full at the usual latency', () => {
    const g = limiter();
    for (let w = 0; w < 12; w++) g.update();
    // 50 calls want in at once, at the same 10 ms: 10 windows (1 s) to hold them, then twice.
    const limits = runWanting(g, 15, 10, 50);
    expect(limits).toEqual([7, 9, 13, 16, 20, 25, 30, 35, 41, 48, 55, 77, 88, 94, 97]);
  });

  it("returns to the unloaded limit (twice the light load's peak) once the load drops, halving the gap per app-limited window", () => {
    const g = limiter();
    expect(runWanting(g, 20, 10, 8).at(-1)).toBe(16);
    // An overload: the event loop late until the floor.
    expect(runWanting(g, 30, 10, 8, 500).at(-1)).toBe(5);
    // The light load again: 8 calls want in, at the unloaded latency.
    expect(runWanting(g, 8, 10, 8, 0)).toEqual([7, 9, 12, 14, 16, 16, 16, 16]);
  });

  it('keeps a lowered limit while the quiet load still sees a latency past the tolerance', () => {
    const g = limiter();
    run(g, 20, 10);
    expect(run(g, 60, 10, 500).at(-1)).toBe(5);
    for (let w = 0; w < 5; w++) {
      for (let i = 0; i < 20; i++) g.sample(40, 1);
      expect(g.update(0)).toBe(5);
    }
  });
});
