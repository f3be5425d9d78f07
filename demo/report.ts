import type { ClientSpec } from './clients.js';
import type { Summary } from './verdict.js';

/** Pads cells into aligned columns, numbers to the right. */
function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map((r) =>
      r.map((cell, c) => (c < 2 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '),
    )
    .join('\n');
}

/** The table of every client: requests sent, admitted, 429s, Retry-After seen, final remaining. */
export function renderTable(results: { spec: ClientSpec; summary: Summary }[]): string {
  const header = [
    'client',
    'route',
    'sent',
    'admitted',
    '429',
    'Retry-After s',
    'remaining',
    'units/allowed',
    'elapsed',
  ];
  const rows = results.map(({ spec, summary: s }) => [
    spec.name,
    spec.route,
    String(s.sent),
    String(s.admitted),
    String(s.refused),
    s.retryAfter ? `${s.retryAfter.min}-${s.retryAfter.max}` : '-',
    s.finalRemaining === undefined ? '-' : String(s.finalRemaining),
    `${s.admittedUnits}/${s.allowedUnits}`,
    `${(s.elapsedMs / 1000).toFixed(1)} s`,
  ]);
  return table([header, ...rows]);
}

/** One checked line per client: PASS with the bound it met, or FAIL with every reason. */
export function verdictLine(spec: ClientSpec, s: Summary): string {
  if (s.problems.length) return `FAIL ${spec.name}: ${s.problems.join('; ')}`;
  const extra = spec.polite ? ', never refused twice in a row' : '';
  return `PASS ${spec.name}: ${s.admittedUnits} units admitted <= ${s.allowedUnits} allowed in ${(s.elapsedMs / 1000).toFixed(1)} s, every 429 with a valid Retry-After${extra}`;
}
