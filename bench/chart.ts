/**
 * The chart `npm run bench` writes beside its JSON: a hand-written SVG of this package's
 * ratios to rate-limiter-flexible (rlf) and to the floor (an empty EVALSHA per decision),
 * one group of horizontal bars per figure, with the issue-14 targets. See bench/README.md.
 *
 *   node bench/dist/chart.js bench/results/<date>.json   writes bench/results/<date>.svg
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** The parts of a results JSON the chart reads (older runs may lack the floor rows). */
export interface ChartResults {
  date?: string;
  machine?: { cpu?: string; cores?: number; node?: string; redis?: string };
  rounds?: number;
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
  /** Ours (`nrl-*`), the floor itself, or another peer. */
  kind: 'ours' | 'floor' | 'peer';
  rlf: number;
  floor: number;
}

/** A ratio the issue asks for, drawn as a dashed line: to rlf (red) or to the floor (orange). */
export interface Target {
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
const PEERS = ['throttler-redis'];
/** The store level's concurrency the chart shows (as the issue's targets do). */
const CONCURRENCY = 16;

function kindOf(name: string): Bar['kind'] | undefined {
  if (name.startsWith('nrl-')) return 'ours';
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
  const order = { ours: 0, floor: 1, peer: 2 };
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
    // Issue 14's targets are on the saturated figure; at this load a wake-up per Redis reply,
    // which the floor pays too, pulls every ratio towards 1, so its lines would mislead here.
    targets: [],
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
const WIDTH = 960;
const PLOT_X = 200;
const PLOT_W = 620;
const ROW_H = 26;
/** Ratios beyond this are drawn to the edge, marked as cut, with their value written. */
export const MAX_AXIS = 5;
const COLOURS = { ours: '#2b6cb0', floor: '#4a5568', peer: '#a0aec0' };
const TARGET_COLOURS = { rlf: '#c53030', floor: '#dd6b20' };
const TARGET_NAMES = { rlf: 'red', floor: 'orange' };

/** The axis end: the largest ratio, target or 1.0, rounded up to a tick. */
export function axisMax(figure: Figure): number {
  const values = figure.bars.flatMap((b) => [b.rlf, b.floor]).filter(Number.isFinite);
  const top = Math.min(MAX_AXIS, Math.max(1, ...values, ...figure.targets.map((t) => t.at)));
  const step = tickStep(top);
  return Math.min(MAX_AXIS, Math.ceil((top * 1.04) / step) * step);
}

function tickStep(top: number): number {
  return top <= 1.5 ? 0.25 : top <= 3 ? 0.5 : 1;
}

function esc(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );
}

const num = (x: number) => (Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));

function text(x: number, y: number, content: string, attrs = ''): string {
  return `<text x="${x}" y="${y}"${attrs ? ` ${attrs}` : ''}>${esc(content)}</text>`;
}

/** One figure's group, from `top`; returns its SVG and height. */
function drawFigure(figure: Figure, index: number, top: number): [string, number] {
  const max = axisMax(figure);
  const scale = PLOT_W / max;
  const x = (ratio: number) => PLOT_X + Math.min(Math.max(ratio, 0), max) * scale;
  const out: string[] = [];
  out.push(
    text(20, top + 16, figure.title, 'font-size="14" font-weight="bold"'),
    text(
      PLOT_X + PLOT_W,
      top + 16,
      `${figure.better} is better`,
      'font-size="11" text-anchor="end" fill="#555"',
    ),
  );
  const plotTop = top + 34;
  const plotBottom = plotTop + figure.bars.length * ROW_H;
  const step = tickStep(max);
  for (let t = 0; t <= max + 1e-9; t += step) {
    out.push(
      `<line x1="${x(t)}" y1="${plotTop}" x2="${x(t)}" y2="${plotBottom}" stroke="#e2e8f0"/>`,
      text(x(t), plotBottom + 14, num(t), 'font-size="10" text-anchor="middle" fill="#555"'),
    );
  }
  figure.bars.forEach((bar, row) => {
    const y = plotTop + row * ROW_H;
    out.push(
      text(PLOT_X - 8, y + 15, bar.label, 'font-size="12" text-anchor="end"'),
      ...drawBar(bar, 'rlf', index, x, max, y + 3, 11),
      ...drawBar(bar, 'floor', index, x, max, y + 15, 8),
    );
  });
  // The 1.0 line (= rlf, = floor) and the targets over the bars.
  out.push(
    `<line class="one" x1="${x(1)}" y1="${plotTop - 6}" x2="${x(1)}" y2="${plotBottom}" stroke="#1a202c" stroke-width="1.5"/>`,
  );
  for (const target of figure.targets) {
    const colour = TARGET_COLOURS[target.of];
    out.push(
      `<line class="target" data-at="${target.at}" data-of="${target.of}" x1="${x(target.at)}" y1="${plotTop - 6}" x2="${x(target.at)}" y2="${plotBottom}" stroke="${colour}" stroke-width="1.5" stroke-dasharray="5 3"/>`,
      text(
        x(target.at),
        plotTop - 9,
        num(target.at),
        `font-size="10" text-anchor="middle" fill="${colour}"`,
      ),
    );
  }
  const notes = figure.targets.map((t) => `${t.label} (${TARGET_NAMES[t.of]} dashed)`);
  const footY = plotBottom + 30;
  out.push(
    text(
      PLOT_X,
      footY,
      notes.length ? `targets: ${notes.join('; ')}` : 'no target for this figure',
      'font-size="10" fill="#555"',
    ),
  );
  return [`<g class="figure" data-figure="${index}">\n${out.join('\n')}\n</g>`, footY + 20 - top];
}

function drawBar(
  bar: Bar,
  of: 'rlf' | 'floor',
  index: number,
  x: (ratio: number) => number,
  max: number,
  y: number,
  height: number,
): string[] {
  const ratio = bar[of];
  if (!Number.isFinite(ratio)) return [];
  const end = x(ratio);
  const opacity = of === 'rlf' ? 1 : 0.4;
  return [
    `<rect class="bar ${of}" data-figure="${index}" data-ratio="${ratio}" x="${PLOT_X}" y="${y}" width="${end - PLOT_X}" height="${height}" fill="${COLOURS[bar.kind]}" fill-opacity="${opacity}"/>`,
    text(
      end + 4,
      y + height - 1,
      `${ratio > max ? '› ' : ''}${num(ratio)}× ${of}`,
      'font-size="10"',
    ),
  ];
}

/** The whole chart of one run's results, as an SVG document. */
export function renderChart(results: ChartResults): string {
  const m = results.machine ?? {};
  const date = results.date ? `${results.date.slice(0, 16).replace('T', ' ')} UTC` : 'undated';
  const rounds = results.rounds === 1 ? 'one round' : `medians of ${results.rounds ?? '?'} rounds`;
  const head = [
    text(
      20,
      28,
      `nest-rate-limit against rate-limiter-flexible and the floor, ${date}`,
      'font-size="18" font-weight="bold"',
    ),
    text(
      20,
      48,
      `${m.cpu ?? 'unknown CPU'}, ${m.cores ?? '?'} cores · Node ${m.node ?? '?'} · Redis ${m.redis ?? '?'} · ${rounds}`,
      'font-size="12" fill="#333"',
    ),
    `<rect x="20" y="60" width="22" height="11" fill="${COLOURS.ours}"/>`,
    text(48, 70, '× rlf: the ratio to rate-limiter-flexible (the line at 1.0)', 'font-size="11"'),
    `<rect x="420" y="62" width="22" height="8" fill="${COLOURS.ours}" fill-opacity="0.4"/>`,
    text(448, 70, '× floor: the ratio to an empty EVALSHA per decision', 'font-size="11"'),
    text(
      20,
      88,
      `bars: this package (blue), the floor (slate), ${PEERS.join(', ')} (grey); › cut at ${MAX_AXIS}×`,
      'font-size="11" fill="#555"',
    ),
  ];
  const body: string[] = [];
  let top = 104;
  const list = figures(results);
  list.forEach((figure, index) => {
    const [svg, height] = drawFigure(figure, index, top);
    body.push(svg);
    top += height;
  });
  if (!list.length) {
    body.push(text(20, top + 16, 'no HTTP or store figures in this run', 'font-size="14"'));
    top += 30;
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${top}" viewBox="0 0 ${WIDTH} ${top}" font-family="Helvetica, Arial, sans-serif">`,
    `<title>${esc(`nest-rate-limit benchmark ratios, ${date}`)}</title>`,
    `<rect width="${WIDTH}" height="${top}" fill="#fff"/>`,
    ...head,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}

/** Writes the chart of `results` beside `jsonFile` (same name, .svg) and returns its path. */
export function writeChart(results: ChartResults, jsonFile: string): string {
  const file = jsonFile.replace(/\.json$/, '') + '.svg';
  writeFileSync(file, renderChart(results));
  return file;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const input = process.argv[2];
  if (!input) {
    console.error('usage: node bench/dist/chart.js <results.json>');
    process.exit(2);
  }
  console.log(
    `wrote ${writeChart(JSON.parse(readFileSync(input, 'utf8')) as ChartResults, input)}`,
  );
}
