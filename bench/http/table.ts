/** The HTTP part's tables: one at saturation and one at the fixed load, per platform. */
import { median, pairedRatio, SPREAD } from '../support.js';
import type { HttpPlatform, HttpRow } from './index.js';

/** Below this share of the target rate, a variant's fixed-load figures are not comparable. */
export const REACHED = 0.97;

/** The rows every other row is measured against: a short one makes all ratios meaningless. */
const BASES = ['none', 'floor-redis', 'rlf-redis'];

/**
 * `+µs` of each row over `none`, and as a multiple of what the floor and rlf add: each paired
 * within its round (the variants of a round ran minutes apart at most), then the median over
 * the rounds; a ratio whose rounds spread beyond ±15% of it is marked `~`.
 */
function added(rows: readonly HttpRow[], cpuOf: (r: HttpRow) => readonly number[]) {
  const roundsOf = (variant: string) => {
    const row = rows.find((r) => r.variant === variant);
    return row ? cpuOf(row) : [];
  };
  const none = roundsOf('none');
  const over = (cpu: readonly number[]) => cpu.map((c, i) => c - (none[i] ?? NaN));
  // What the floor and the peer add, per round: each variant's +µs is read as a multiple of theirs.
  const floorAdded = over(roundsOf('floor-redis'));
  const rlfAdded = over(roundsOf('rlf-redis'));
  const times = (add: number[], base: number[]) => {
    const r = pairedRatio(add, base);
    return r ? `${r.median.toFixed(2)}${r.spread ? '~' : ''}` : '–';
  };
  return (r: HttpRow) => {
    const add = over(cpuOf(r));
    const isNone = r.variant === 'none';
    return [
      median(add).toFixed(1),
      isNone ? '' : times(add, floorAdded),
      isNone ? '' : times(add, rlfAdded),
    ];
  };
}

/**
 * A line when the floor (one EVALSHA of an empty script) adds more than rlf (a full
 * decision): the run's differences are noise at this load, and its ratios not comparable.
 */
function floorAboveRlf(rows: readonly HttpRow[], cpuOf: (r: HttpRow) => readonly number[]) {
  const at = (variant: string) => rows.find((r) => r.variant === variant);
  const [none, floor, rlf] = [at('none'), at('floor-redis'), at('rlf-redis')];
  if (!none || !floor || !rlf) return [];
  const add = (r: HttpRow) => median(cpuOf(r).map((c, i) => c - cpuOf(none)[i]!));
  return add(floor) > add(rlf)
    ? [
        `! the floor adds more than rlf (${add(floor).toFixed(1)} > ${add(rlf).toFixed(1)} µs): this table's ratios are not comparable`,
      ]
    : [];
}

/** Names and the last column read left to right; numbers line up on the right. */
function align(header: string[], body: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((cells) => cells[i]!.length)));
  const format = (cells: string[]) =>
    cells
      .map((c, i) =>
        i === 0 || i === cells.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!),
      )
      .join('  ')
      .trimEnd();
  return [format(header), ...body.map(format)];
}

const isUndecided = (r: HttpRow, count: number) =>
  r.variant !== 'none' && !r.variant.startsWith('floor-') && count > 0;

/**
 * The variants that answered without a decision (`?`): their limiter failed open (its store
 * timed out, its circuit breaker opened), so what they cost is not what deciding costs.
 * `none` and the floor decide nothing and send no header.
 */
const undecided = (rows: readonly HttpRow[], count: (r: HttpRow) => number) => {
  const flagged = rows.filter((r) => isUndecided(r, count(r)));
  return flagged.length
    ? [
        `? answered 2xx without a rate-limit header (failed open: not comparable): ${flagged.map((r) => `${r.variant} ${count(r)}`).join(', ')}`,
      ]
    : [];
};
const failures = (rows: readonly HttpRow[], count: (r: HttpRow) => number) => {
  const flagged = rows.filter((r) => count(r));
  return flagged.length
    ? [`! non-2xx or failed requests: ${flagged.map((r) => `${r.variant} ${count(r)}`).join(', ')}`]
    : [];
};

/** The table at saturation (autocannon, as fast as the app answers). */
export function saturatedTable(
  platform: HttpPlatform,
  rows: HttpRow[],
  connections: number,
): string[] {
  const header = [
    'variant',
    'req/s',
    '×none',
    'p50 ms',
    '×none',
    'p99 ms',
    '×none',
    'CPU µs/req',
    '+µs',
    '+µs ×floor',
    '+µs ×rlf',
    'per-round req/s',
  ];
  const add = added(rows, (r) => r.cpuRounds);
  const body = rows.map((r) => [
    `${r.variant}${r.non2xx ? ' !' : ''}${isUndecided(r, r.undecided) ? ' ?' : ''}`,
    r.rps.toFixed(0),
    r.rpsRatio.toFixed(2),
    r.p50Ms.toFixed(2),
    r.p50Ratio.toFixed(2),
    r.p99Ms.toFixed(2),
    r.p99Ratio.toFixed(2),
    r.cpuUsPerRequest.toFixed(1),
    ...add(r),
    r.rounds.map((x) => x.toFixed(0)).join(' '),
  ]);
  return [
    `HTTP ${platform}, ${connections} connections, median of ${rows[0]?.rounds.length ?? 0} rounds (×none paired per round; CPU: the app process's own, per request; +µs: CPU added over none, ×floor and ×rlf: as a multiple of what floor-redis and rlf-redis add, each paired per round; ~: its rounds spread beyond ±${SPREAD * 100}%):`,
    ...align(header, body),
    ...floorAboveRlf(rows, (r) => r.cpuRounds),
    ...failures(rows, (r) => r.non2xx),
    ...undecided(rows, (r) => r.undecided),
  ];
}

/**
 * The table at the fixed load, beside each variant's `+µs` at saturation; the rows without
 * a fixed-load measure (none was asked for) give no table.
 */
export function fixedRateTable(
  platform: HttpPlatform,
  rows: HttpRow[],
  connections: number,
): string[] {
  const measured = rows.filter((r) => r.fixedRate);
  const target = measured[0]?.fixedRate?.targetRps;
  if (target === undefined) return [];
  const header = [
    'variant',
    'req/s',
    'CPU µs/req',
    '+µs',
    '+µs ×floor',
    '+µs ×rlf',
    'saturated +µs',
    'p50 ms',
    'p99 ms',
    'per-round req/s',
  ];
  // A base that fell short makes every ratio to it, and every +µs over it, not comparable.
  const shortBases = BASES.filter((v) =>
    measured.some((r) => r.variant === v && !r.fixedRate!.reached),
  );
  const add = shortBases.length
    ? () => ['–', '–', '–']
    : added(measured, (r) => r.fixedRate!.cpuRounds);
  const addSaturated = added(rows, (r) => r.cpuRounds);
  const body = measured.map((r) => {
    const f = r.fixedRate!;
    const marks = `${f.reached ? '' : ' <'}${f.non2xx ? ' !' : ''}${isUndecided(r, f.undecided) ? ' ?' : ''}`;
    return [
      `${r.variant}${marks}`,
      f.rps.toFixed(0),
      f.cpuUsPerRequest.toFixed(1),
      ...add(r),
      addSaturated(r)[0]!,
      f.p50Ms.toFixed(2),
      f.p99Ms.toFixed(2),
      f.rounds.map((x) => x.toFixed(0)).join(' '),
    ];
  });
  const short = measured.filter((r) => !r.fixedRate!.reached);
  return [
    `HTTP ${platform} at a fixed ${target} req/s (sent evenly over time), ${connections} connections, median of ${measured[0]!.fixedRate!.rounds.length} rounds (CPU per request at that load; +µs over none at the same load, ×floor and ×rlf as above; saturated +µs: the table above's):`,
    ...align(header, body),
    ...(short.length
      ? [
          `< a round below ${REACHED * 100}% of ${target} req/s (its slowest shown), not comparable: ${short.map((r) => `${r.variant} ${Math.min(...r.fixedRate!.rounds).toFixed(0)}`).join(', ')}`,
        ]
      : []),
    ...(shortBases.length
      ? [`< ${shortBases.join(', ')} fell short: no +µs or ratio at this load is comparable`]
      : []),
    ...(shortBases.length ? [] : floorAboveRlf(measured, (r) => r.fixedRate!.cpuRounds)),
    ...failures(measured, (r) => r.fixedRate!.non2xx),
    ...undecided(measured, (r) => r.fixedRate!.undecided),
  ];
}
