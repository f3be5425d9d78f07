/** The overload part's tables (see bench/README.md, The overload part). */
import { fmt, table } from '../support.js';
import type { CpuRow } from './index.js';
import type { TargetCheck, VariantFigures } from './figures.js';
import type { HttpPlatform } from '../http/index.js';

/** The largest per-request cost of overload protection below capacity, µs of CPU (issue 36). */
const COST_TARGET_US = 2;

const seconds = (s: number | undefined) =>
  s === undefined ? '–' : Number.isFinite(s) ? fmt(s) : 'never';
const ms = (v: number | null) => (v === null || Number.isNaN(v) ? '–' : fmt(v));
const pct = (share: number) => (Number.isNaN(share) ? '–' : `${(100 * share).toFixed(1)}%`);

/** One row per variant and load. */
export function loadTable(variants: readonly VariantFigures[]): string[] {
  const rows = variants.flatMap((v) =>
    v.loads.map((l) => [
      v.variant,
      `${l.load}×`,
      Math.round(l.offeredRps),
      Math.round(l.goodputRps),
      pct(l.goodputShare),
      pct(l.criticalOkShare),
      ms(l.critical.p50Ms),
      ms(l.critical.p99Ms),
      ms(l.criticalSteadyP99Ms),
      pct(l.sheddable.sent ? l.sheddable.ok / l.sheddable.sent : NaN),
      ms(l.sheddable.p50Ms),
      ms(l.sheddable.p99Ms),
      [l.critical, l.sheddable]
        .map((p) => [p.unavailable, p.refused, p.timeouts, p.other])
        .reduce((a, b) => a.map((x, i) => x + b[i]!))
        .join('/'),
      seconds(l.limitBackS),
      seconds(l.servedAgainS),
    ]),
  );
  const unloaded = variants
    .map(
      (v) =>
        `${v.variant} ${ms(v.unloadedCriticalP99Ms)} ms${v.unloadedLimit === undefined ? '' : ` (limit ${fmt(v.unloadedLimit)})`}`,
    )
    .join(', ');
  return [
    `unloaded critical p99 (at half the capacity): ${unloaded}`,
    table(
      [
        'variant',
        'load',
        'offered/s',
        'goodput/s',
        '×capacity',
        'critical ok',
        'crit p50 ms',
        'crit p99 ms',
        'crit p99 steady',
        'sheddable ok',
        'shed p50 ms',
        'shed p99 ms',
        '503/429/timeout/other',
        'limit back s',
        'served again s',
      ],
      rows,
    ),
  ];
}

export function targetLines(v: VariantFigures, checks: readonly TargetCheck[]): string[] {
  if (!checks.length) return [];
  return [
    `targets at 2×, ${v.variant}: ${checks
      .map((c) => `${c.target}: ${c.value} ${c.pass ? 'PASS' : 'FAIL'}`)
      .join('; ')}`,
  ];
}

export function cpuTable(
  platform: HttpPlatform,
  rows: readonly CpuRow[],
  costUs: number | undefined,
): string[] {
  const none = rows.find((r) => r.variant === 'none');
  const rate = rows[0]?.rateRps ?? 0;
  return [
    `\noverload cost, ${platform}: GET /hi at ${rate} req/s, app CPU µs per request (medians)`,
    table(
      ['variant', 'req/s', 'CPU µs/req', '+µs over none', 'per-round req/s', 'non-2xx'],
      rows.map((r) => [
        r.variant,
        Math.round(r.rps),
        fmt(r.cpuUsPerRequest),
        none ? fmt(r.cpuUsPerRequest - none.cpuUsPerRequest) : '–',
        r.rounds.map(Math.round).join(' '),
        r.non2xx,
      ]),
    ),
    costUs === undefined
      ? 'overload on minus off: no figure (nrl-overload did not start, or a variant fell short of the rate)'
      : `overload on minus off (paired per round): ${fmt(costUs)} µs per request, target < ${COST_TARGET_US}: ${costUs < COST_TARGET_US ? 'PASS' : 'FAIL'}`,
  ];
}
