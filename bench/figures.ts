/**
 * The figures of the chart: which bars and target lines each group of a bench run's JSON
 * gives (bench/chart.ts draws them).
 */

import { isBase, isOurs } from './twins.js';

/** The parts of a results JSON the chart reads (older runs may lack the floor rows). */
export interface ChartResults {
  date?: string;
  machine?: { cpu?: string; cores?: number; node?: string; redis?: string };
  rounds?: number;
  /** BENCH_BASELINE's ref and commit, in a run with `@base` rows. */
  baseline?: { ref: string; commit: string };
  http?: readonly {
    platform: string;
    variant: string;
    cpuUsPerRequest: number;
    /** At the fixed offered load (runs from before it lack it). */
    fixedRate?: { targetRps: number; cpuUsPerRequest: number; reached: boolean };
  }[];
  store?: readonly { contender: string; perSecond: Record<string, number>; usecPerCall: number }[];
}

/** One row of a figure: its ratio to rlf and to the floor (NaN where there is none). */
export interface Bar {
  label: string;
  /**
   * Ours (`nrl-*`), ours on BENCH_BASELINE's build (`nrl-*@base`, right after its twin), the
   * floor itself, or another peer.
   */
  kind: 'ours' | 'base' | 'floor' | 'peer';
  rlf: number;
  floor: number;
}

/** A ratio the issue asks for, drawn as a dashed line: to rlf (red) or to the floor (orange). */
interface Target {
  at: number;
  of: 'rlf' | 'floor';
  label: string;
}

export interface Figure {
  title: string;
  better: 'lower' | 'higher';
  bars: Bar[];
  targets: Target[];
}

/** rate-limiter-flexible's row, in the HTTP part and the store level alike. */
const RLF = 'rlf-redis';
/** Peers other than rlf shown for context; rlf itself is the line at 1.0. */
export const PEERS = ['throttler-redis'];
/** The store level's concurrency the chart shows (as the targets do). */
const CONCURRENCY = 16;

function kindOf(name: string): Bar['kind'] | undefined {
  if (isOurs(name)) return isBase(name) ? 'base' : 'ours';
  if (name === 'floor' || name === 'floor-redis') return 'floor';
  return PEERS.includes(name) ? 'peer' : undefined;
}

/** Bars of `rows` whose value `value(row)` is divided by rlf's and by the floor's. */
function barsOf<R>(rows: readonly R[], name: (row: R) => string, value: (row: R) => number): Bar[] {
  const of = (n: string) => {
    const row = rows.find((r) => name(r) === n);
    return row ? value(row) : NaN;
  };
  // A base of 0 or less (noise) gives no ratio rather than an infinite one.
  const ratio = (v: number, base: number) => (base > 0 ? v / base : NaN);
  const rlf = of(RLF);
  const floor = rows.map(name).find((n) => kindOf(n) === 'floor');
  const floorValue = floor === undefined ? NaN : of(floor);
  const bars = rows.flatMap((row) => {
    const kind = kindOf(name(row));
    if (!kind) return [];
    const v = value(row);
    return [
      {
        label: name(row),
        kind,
        rlf: ratio(v, rlf),
        floor: kind === 'floor' ? NaN : ratio(v, floorValue),
      },
    ];
  });
  // A stable sort: each `@base` bar stays right after its twin's.
  const order = { ours: 0, base: 0, floor: 1, peer: 2 };
  return bars.sort((a, b) => order[a.kind] - order[b.kind]);
}

/** Issue 14's targets for the CPU Fastify adds per request. */
const FASTIFY_CPU_TARGETS: Target[] = [
  { at: 0.75, of: 'rlf', label: 'token bucket, GCRA ≤ 0.75× rlf' },
  { at: 1.3, of: 'floor', label: 'token bucket, GCRA ≤ 1.3× floor' },
];

/**
 * The Fastify figure at the fixed offered load, or none when the run has no such measure. A
 * variant that fell short of the rate keeps its bars, labelled as not comparable.
 */
function fixedRateFigure(http: NonNullable<ChartResults['http']>): Figure | undefined {
  const rows = http.filter((r) => r.platform === 'fastify' && r.fixedRate);
  const none = rows.find((r) => r.variant === 'none')?.fixedRate;
  if (!none) return undefined;
  const short = new Set(rows.filter((r) => !r.fixedRate!.reached).map((r) => r.variant));
  // Every bar is a ratio to rlf's and the floor's +µs over none's: one of them short, none is comparable.
  if (['none', 'floor-redis', RLF].some((v) => short.has(v))) return undefined;
  const bars = barsOf(
    rows,
    (r) => r.variant,
    (r) => r.fixedRate!.cpuUsPerRequest - none.cpuUsPerRequest,
  ).map((bar) => (short.has(bar.label) ? { ...bar, label: `${bar.label} (short)` } : bar));
  return {
    title: `Fastify at a fixed ${none.targetRps} req/s: CPU µs the limiter adds per request`,
    better: 'lower',
    bars,
    targets: FASTIFY_CPU_TARGETS,
  };
}

/** The figures of a run, in the order drawn; a part the run skipped has none. */
export function figures(results: ChartResults): Figure[] {
  const list: Figure[] = [];
  for (const platform of ['fastify', 'express'] as const) {
    const rows = (results.http ?? []).filter((r) => r.platform === platform);
    const none = rows.find((r) => r.variant === 'none')?.cpuUsPerRequest ?? NaN;
    if (!rows.length) continue;
    list.push({
      title: `${platform === 'fastify' ? 'Fastify' : 'Express'}: CPU µs the limiter adds per request${platform === 'fastify' && rows.some((r) => r.fixedRate) ? ', saturated' : ''}`,
      better: 'lower',
      bars: barsOf(
        rows,
        (r) => r.variant,
        (r) => r.cpuUsPerRequest - none,
      ),
      targets: platform === 'fastify' ? FASTIFY_CPU_TARGETS : [],
    });
    // Right after the saturated one: the same target, measured without the load-level effect.
    const fixed = platform === 'fastify' ? fixedRateFigure(rows) : undefined;
    if (fixed) list.push(fixed);
  }
  const store = results.store ?? [];
  if (store.length) {
    list.push({
      title: `Store: decisions/s at c=${CONCURRENCY}`,
      better: 'higher',
      bars: barsOf(
        store,
        (r) => r.contender,
        (r) => r.perSecond[CONCURRENCY] ?? NaN,
      ),
      targets: [
        { at: 1, of: 'rlf', label: 'GCRA ≥ 1.0× rlf' },
        { at: 0.7, of: 'rlf', label: 'stacked ≥ 0.7× rlf' },
      ],
    });
    list.push({
      title: `Redis µs per decision (INFO commandstats, c=${CONCURRENCY})`,
      better: 'lower',
      bars: barsOf(
        store,
        (r) => r.contender,
        (r) => r.usecPerCall,
      ),
      targets: [{ at: 1, of: 'rlf', label: 'GCRA ≤ 1.0× rlf' }],
    });
  }
  return list;
}

/** Layout, in px. */
