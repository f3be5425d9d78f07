import { describe, expect, it } from '@jest/globals';
import {
  recoveredAfter,
  servedAgain,
  steadyP99,
  targetsAt2x,
  variantFigures,
  type VariantRun,
} from '../../bench/overload/figures.js';
import type { PhaseResult, PriorityFigures, TracedRequest } from '../../bench/overload/load.js';

const figures = (over: Partial<PriorityFigures> = {}): PriorityFigures => ({
  sent: 100,
  ok: 100,
  unavailable: 0,
  refused: 0,
  other: 0,
  timeouts: 0,
  p50Ms: 3,
  p99Ms: 5,
  ...over,
});

const phase = (over: Partial<PhaseResult> = {}): PhaseResult => ({
  rateRps: 200,
  durationS: 1,
  goodputRps: 200,
  byPriority: { critical: figures(), sheddable: figures() },
  ...over,
});

/** One request every 10 ms over `durationMs`, answered `status` in `latencyMs` (by time). */
const trace = (
  durationMs: number,
  answer: (atMs: number) => [status: number, latencyMs: number],
): TracedRequest[] =>
  Array.from({ length: durationMs / 10 }, (_, i) => [i * 10, i % 5 ? 1 : 0, ...answer(i * 10)]);

describe('bench overload: recovery of the protection', () => {
  const samples = [0, 50, 100, 150, 200, 250].map((t, i) => ({
    atMs: 1000 + t,
    limit: [4, 6, 8, 20, 20, 20][i]!,
  }));

  it('counts from the drop to the first sample after the last degraded one', () => {
    expect(recoveredAfter(samples, 1000, 2000, (s) => s.limit! < 18)).toBe(0.15);
  });

  it('is 0 when nothing was degraded, Infinity when the last sample still was', () => {
    expect(recoveredAfter(samples, 1000, 2000, () => false)).toBe(0);
    expect(recoveredAfter(samples, 1000, 2000, (s) => s.limit! < 100)).toBe(Infinity);
  });

  it('has no figure without samples in the window', () => {
    expect(recoveredAfter(samples, 5000, 6000, () => true)).toBeUndefined();
  });
});

describe('bench overload: served again after the load dropped', () => {
  it('is the end of the last 250 ms slice with a failure or a slow p95', () => {
    const recovery = phase({
      durationS: 2,
      requests: trace(2000, (at) => (at < 400 ? [503, 1] : at < 700 ? [200, 40] : [200, 4])),
    });
    // 503s up to 400 ms, slow (40 ms > 15 ms) up to 700 ms: the slice [500, 750) is the last bad one.
    expect(servedAgain(recovery, 15)).toBe(0.75);
    expect(servedAgain(recovery, 50)).toBe(0.5);
  });

  it('is Infinity when the last slice still fails, 0 when none did', () => {
    expect(servedAgain(phase({ requests: trace(1000, () => [0, 1000]) }), 15)).toBe(Infinity);
    expect(servedAgain(phase({ requests: trace(1000, () => [200, 4]) }), 15)).toBe(0);
  });
});

describe('bench overload: the critical p99 of the steady state', () => {
  it('counts only the critical answers 2xx due from 1 s after the load began', () => {
    // Critical every 50 ms, one in two answered 503: the 200s take 40 ms in the first second,
    // then 1, 11, 21 and 31 ms in turn; sheddable ones 500 ms.
    const requests = trace(3000, (at) => [
      at % 100 === 50 ? 503 : 200,
      at < 1000 ? 40 : 1 + (at % 400) / 10,
    ]);
    requests.forEach((r) => r[1] === 1 && (r[3] = 500));
    expect(steadyP99(phase({ requests }), 0)).toBe(31);
    expect(steadyP99(phase({ requests }), 1)).toBe(500);
    expect(steadyP99(phase({}), 0)).toBeNull();
  });
});

describe('bench overload: the targets at 2× capacity', () => {
  /** `after`: the limit every 500 ms from the drop; undefined: no limit sampled. */
  const run = (
    critical: Partial<PriorityFigures>,
    goodputRps: number,
    after?: number[],
    steadyMs = 12,
  ) => {
    const samples = after
      ? [
          // The second before the load: the unloaded limit is their median, 20.
          { atMs: 8000, limit: 20 },
          { atMs: 8500, limit: 20 },
          { atMs: 9500, limit: 5 },
          ...after.map((limit, i) => ({ atMs: 10_000 + 500 * i, limit })),
        ]
      : [];
    return variantFigures({
      variant: 'nrl-adaptive',
      capacityRps: 400,
      unloaded: phase({ byPriority: { critical: figures({ p99Ms: 4 }), sheddable: figures() } }),
      loads: [
        {
          load: 2,
          phase: phase({
            rateRps: 800,
            goodputRps,
            byPriority: { critical: figures(critical), sheddable: figures({ ok: 10 }) },
            // Slow in the onset (the first second), `steadyMs` after it.
            requests: trace(3000, (at) => [200, at < 1000 ? 200 : steadyMs]),
          }),
          recovery: phase({ durationS: 6, requests: trace(6000, () => [200, 4]) }),
          startedAtMs: 9000,
          droppedAtMs: 10_000,
        },
      ],
      samples,
    } satisfies VariantRun);
  };

  it('passes each target at its bound', () => {
    // Below 90% of 20 until 10,500 ms, 18 from 11,000: back 1 s after the drop.
    const checks = targetsAt2x(run({ ok: 99, p99Ms: 12 }, 360, [5, 5, 18, 19]));
    expect(checks.map((c) => [c.value, c.pass])).toEqual([
      ['99.0%', true],
      ['12.0 ms', true],
      ['12.0 ms', true],
      ['90%', true],
      ['1.00 s', true],
    ]);
  });

  it('fails each target past its bound', () => {
    const checks = targetsAt2x(run({ ok: 98, p99Ms: 12.1 }, 359, [5, 5, 5], 12.1));
    expect(checks.map((c) => [c.value, c.pass])).toEqual([
      ['98.0%', false],
      ['12.1 ms', false],
      ['12.1 ms', false],
      ['90%', false],
      ['not in the recovery phase', false],
    ]);
  });

  it('fails the latency target when no critical request succeeded', () => {
    const checks = targetsAt2x(run({ ok: 0, p50Ms: null, p99Ms: null }, 0, [20]));
    expect(checks[1]).toMatchObject({ value: 'none succeeded', pass: false });
  });

  it('judges a variant without a limit by when it served again', () => {
    const figuresOf = run({}, 400);
    expect(figuresOf.unloadedLimit).toBeUndefined();
    expect(figuresOf.loads[0]!.limitBackS).toBeUndefined();
    expect(targetsAt2x(figuresOf)[4]).toEqual({
      target: 'recovery ≤ 5 s (served again)',
      value: '0.00 s',
      pass: true,
    });
  });
});
