/**
 * The overload part's figures from a run's raw results: per load, goodput and latency per
 * priority, how long the protection took to recover after the load dropped, and the targets
 * of issue 36 at 2× capacity. Pure: no process, no clock.
 */
import { median } from '../support.js';
import type { PhaseResult, PriorityFigures } from './load.js';

/** One sample: epoch ms, and the adaptive limit or under-pressure's state (1 refusing, 0 not). */
export interface Sample {
  atMs: number;
  limit?: number;
  inFlight?: number;
  underPressure?: number;
}

/** What a sample counts as recovered: the adaptive limit back to this share of its unloaded value. */
const LIMIT_RECOVERED = 0.9;
/** Width of the slices the recovery phase is judged in, ms. */
const RECOVERY_SLICE_MS = 250;
/** The latency bound of a recovered slice: this many times the unloaded critical p99. */
const LATENCY_BOUND = 3;
/**
 * How long after a load begins its steady state is taken to start, ms: a protection needs a
 * moment to see an overload (ours waits out two busy windows, 200 ms, so that an idle
 * process's burst is never shed), and the queue built meanwhile drains after it.
 */
const ONSET_MS = 1000;

interface LoadFigures {
  /** The load, as a multiple of the measured capacity. */
  load: number;
  offeredRps: number;
  goodputRps: number;
  /** Goodput over the capacity. */
  goodputShare: number;
  critical: PriorityFigures;
  sheddable: PriorityFigures;
  /** Share of the critical requests answered 2xx (within the client's timeout). */
  criticalOkShare: number;
  /**
   * p99 latency, ms, of the critical requests answered 2xx among those due
   * {@link ONSET_MS} or more after the load began: the steady state, without the onset.
   */
  criticalSteadyP99Ms: number | null;
  /**
   * Seconds after the load dropped until the protection stood down: the adaptive limit back
   * to {@link LIMIT_RECOVERED} of its unloaded value and staying there, or under-pressure no
   * longer refusing. Undefined when the variant has nothing to recover (none, a static
   * limit); Infinity when not recovered within the recovery phase.
   */
  limitBackS: number | undefined;
  /**
   * Seconds after the load dropped until every later slice of {@link RECOVERY_SLICE_MS} had
   * all its requests answered 2xx with a p95 within {@link LATENCY_BOUND}× the unloaded
   * critical p99. Infinity when that never held to the end of the recovery phase.
   */
  servedAgainS: number;
}

/**
 * Seconds from `fromMs` (epoch) to the first sample after the last one `degraded` within
 * `[fromMs, toMs]`: 0 when none was, Infinity when the last one was, undefined without samples.
 */
export function recoveredAfter(
  samples: readonly Sample[],
  fromMs: number,
  toMs: number,
  degraded: (s: Sample) => boolean,
): number | undefined {
  const within = samples.filter((s) => s.atMs >= fromMs && s.atMs <= toMs);
  if (!within.length) return undefined;
  let last = -1;
  within.forEach((s, i) => {
    if (degraded(s)) last = i;
  });
  if (last < 0) return 0;
  const next = within[last + 1];
  return next ? (next.atMs - fromMs) / 1000 : Infinity;
}

/** See {@link LoadFigures.servedAgainS}. `phase` is the recovery phase, traced. */
export function servedAgain(phase: PhaseResult, boundMs: number): number {
  const slices = Math.ceil((phase.durationS * 1000) / RECOVERY_SLICE_MS);
  const good = Array.from({ length: slices }, (_, i) => {
    const requests = (phase.requests ?? []).filter(
      ([at]) => at >= i * RECOVERY_SLICE_MS && at < (i + 1) * RECOVERY_SLICE_MS,
    );
    if (!requests.some(([, , status]) => status < 200 || status > 299)) {
      const sorted = requests.map(([, , , ms]) => ms).sort((a, b) => a - b);
      return (sorted[Math.max(0, Math.ceil(0.95 * sorted.length) - 1)] ?? 0) <= boundMs;
    }
    return false;
  });
  const lastBad = good.lastIndexOf(false);
  if (lastBad === slices - 1) return Infinity;
  return ((lastBad + 1) * RECOVERY_SLICE_MS) / 1000;
}

/**
 * The p99 latency, ms, of the 2xx answers to priority `priority` (index) among the requests
 * due {@link ONSET_MS} or more after `phase` began; null without a trace or an answer.
 */
export function steadyP99(phase: PhaseResult, priority: number): number | null {
  const sorted = (phase.requests ?? [])
    .filter(([at, p, status]) => at >= ONSET_MS && p === priority && status >= 200 && status < 300)
    .map(([, , , ms]) => ms)
    .sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(0.99 * sorted.length) - 1)] ?? null;
}

/** The figures of a variant's run, as index.ts lays it out. */
export interface VariantRun {
  variant: string;
  capacityRps: number;
  /** The unloaded phase (half the capacity). */
  unloaded: PhaseResult;
  /** Each load's phase and the recovery phase after it, with the epoch ms the load began and dropped at. */
  loads: {
    load: number;
    phase: PhaseResult;
    recovery: PhaseResult;
    startedAtMs: number;
    droppedAtMs: number;
  }[];
  samples: Sample[];
}

export interface VariantFigures {
  variant: string;
  capacityRps: number;
  /** Null when no critical request succeeded unloaded. */
  unloadedCriticalP99Ms: number | null;
  /** The median adaptive limit while unloaded; undefined for the other variants. */
  unloadedLimit: number | undefined;
  loads: LoadFigures[];
}

export function variantFigures(run: VariantRun): VariantFigures {
  const unloadedCriticalP99Ms = run.unloaded.byPriority.critical.p99Ms;
  // The unloaded phase ends where the first load begins: its last second of samples.
  const loadedFromMs = run.loads[0]?.startedAtMs ?? Infinity;
  const limits = run.samples
    .filter((s) => s.limit !== undefined && s.atMs < loadedFromMs && s.atMs >= loadedFromMs - 1000)
    .map((s) => s.limit!);
  const unloadedLimit = limits.length ? median(limits) : undefined;
  const degraded = (s: Sample) =>
    s.underPressure === 1 ||
    (s.limit !== undefined &&
      unloadedLimit !== undefined &&
      s.limit < LIMIT_RECOVERED * unloadedLimit);
  const hasState = run.samples.some((s) => s.limit !== undefined || s.underPressure !== undefined);
  return {
    variant: run.variant,
    capacityRps: run.capacityRps,
    unloadedCriticalP99Ms,
    unloadedLimit,
    loads: run.loads.map(({ load, phase, recovery, droppedAtMs }) => {
      const { critical, sheddable } = phase.byPriority;
      return {
        load,
        offeredRps: phase.rateRps,
        goodputRps: phase.goodputRps,
        goodputShare: phase.goodputRps / run.capacityRps,
        critical,
        sheddable,
        criticalOkShare: critical.sent ? critical.ok / critical.sent : NaN,
        criticalSteadyP99Ms: steadyP99(phase, 0),
        limitBackS: hasState
          ? recoveredAfter(
              run.samples,
              droppedAtMs,
              droppedAtMs + recovery.durationS * 1000,
              degraded,
            )
          : undefined,
        servedAgainS: servedAgain(recovery, LATENCY_BOUND * (unloadedCriticalP99Ms ?? NaN)),
      };
    }),
  };
}

export interface TargetCheck {
  target: string;
  value: string;
  pass: boolean;
}

/** Issue 36's targets at 2× capacity, for one variant; empty when it ran no 2× load. */
export function targetsAt2x(v: VariantFigures): TargetCheck[] {
  const at = v.loads.find((l) => l.load === 2);
  if (!at) return [];
  const p99Bound = LATENCY_BOUND * (v.unloadedCriticalP99Ms ?? NaN);
  const p99 = at.critical.p99Ms;
  // Ours has a limit to recover; the others are judged by when they served well again.
  const recovery = at.limitBackS ?? at.servedAgainS;
  const what = at.limitBackS === undefined ? 'served again' : 'limit back';
  return [
    {
      target: 'critical ≥ 99% successful',
      value: `${(100 * at.criticalOkShare).toFixed(1)}%`,
      pass: at.criticalOkShare >= 0.99,
    },
    {
      target: `critical p99 ≤ 3× unloaded (${p99Bound.toFixed(1)} ms)`,
      value: p99 === null ? 'none succeeded' : `${p99.toFixed(1)} ms`,
      pass: p99 !== null && p99 <= p99Bound,
    },
    {
      target: `the same after the first ${ONSET_MS / 1000} s (steady state)`,
      value: at.criticalSteadyP99Ms === null ? 'none' : `${at.criticalSteadyP99Ms.toFixed(1)} ms`,
      pass: at.criticalSteadyP99Ms !== null && at.criticalSteadyP99Ms <= p99Bound,
    },
    {
      target: 'goodput ≥ 90% of capacity',
      value: `${(100 * at.goodputShare).toFixed(0)}%`,
      pass: at.goodputShare >= 0.9,
    },
    {
      target: `recovery ≤ 5 s (${what})`,
      value: Number.isFinite(recovery) ? `${recovery.toFixed(2)} s` : 'not in the recovery phase',
      pass: recovery <= 5,
    },
  ];
}
