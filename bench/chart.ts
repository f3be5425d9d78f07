/**
 * The chart `npm run bench` writes beside its JSON: a hand-written SVG of this package's
 * ratios to rate-limiter-flexible (rlf) and to the floor (an empty EVALSHA per decision),
 * one group of horizontal bars per figure, with the issue-14 targets. See bench/README.md.
 *
 *   node bench/dist/chart.js bench/results/<date>.json   writes bench/results/<date>.svg
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

import { figures, PEERS, type Bar, type ChartResults, type Figure } from './figures.js';

export { figures } from './figures.js';
export type { ChartResults, Figure } from './figures.js';

const WIDTH = 960;
const PLOT_X = 200;
const PLOT_W = 620;
const ROW_H = 26;
/** Ratios beyond this are drawn to the edge, marked as cut, with their value written. */
export const MAX_AXIS = 5;
const COLOURS = { ours: '#2b6cb0', base: '#805ad5', floor: '#4a5568', peer: '#a0aec0' };
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
  let top = 104;
  const base = results.baseline;
  if (base) {
    head.push(
      `<rect x="20" y="96" width="22" height="11" fill="${COLOURS.base}"/>`,
      text(
        48,
        106,
        `@base: the same variant on ${base.ref} (${base.commit.slice(0, 12)}), measured in the same rounds, below its twin`,
        'font-size="11"',
      ),
    );
    top += 18;
  }
  const body: string[] = [];
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
