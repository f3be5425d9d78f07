import { describe, expect, it } from '@jest/globals';
import { axisMax, figures, MAX_AXIS, renderChart, type ChartResults } from '../../bench/chart.js';

/** CPU µs per request: none 40, so the floor adds 8, rlf 16, token bucket 12, GCRA 24. */
const RUN: ChartResults = {
  date: '2026-12-01T08:59:39.650Z',
  machine: { cpu: 'AMD EPYC <&>', cores: 2, node: 'v20.20.2', redis: '7.0.15' },
  rounds: 3,
  http: [
    { platform: 'fastify', variant: 'none', cpuUsPerRequest: 40 },
    { platform: 'fastify', variant: 'floor-redis', cpuUsPerRequest: 48 },
    { platform: 'fastify', variant: 'nrl-tb', cpuUsPerRequest: 52 },
    { platform: 'fastify', variant: 'nrl-gcra', cpuUsPerRequest: 64 },
    { platform: 'fastify', variant: 'throttler-memory', cpuUsPerRequest: 400 },
    { platform: 'fastify', variant: 'throttler-redis', cpuUsPerRequest: 60 },
    { platform: 'fastify', variant: 'rlf-redis', cpuUsPerRequest: 56 },
    { platform: 'express', variant: 'none', cpuUsPerRequest: 100 },
    { platform: 'express', variant: 'floor-redis', cpuUsPerRequest: 110 },
    { platform: 'express', variant: 'nrl-tb', cpuUsPerRequest: 130 },
    { platform: 'express', variant: 'rlf-redis', cpuUsPerRequest: 120 },
  ],
  store: [
    { contender: 'floor', perSecond: { 1: 5000, 16: 40_000 }, usecPerCall: 1 },
    { contender: 'nrl-gcra', perSecond: { 1: 3000, 16: 24_000 }, usecPerCall: 6 },
    { contender: 'rlf-redis', perSecond: { 1: 3000, 16: 30_000 }, usecPerCall: 4 },
  ],
};

interface DrawnBar {
  of: string;
  figure: number;
  ratio: number;
  width: number;
}

function bars(svg: string): DrawnBar[] {
  const re =
    /<rect class="bar (rlf|floor)" data-figure="(\d+)" data-ratio="([^"]+)" x="[^"]+" y="[^"]+" width="([^"]+)"/g;
  return [...svg.matchAll(re)].map((m) => ({
    of: m[1]!,
    figure: Number(m[2]),
    ratio: Number(m[3]),
    width: Number(m[4]),
  }));
}

describe('bench chart: the ratios', () => {
  it("divides each variant's CPU added per request by rlf's and by the floor's", () => {
    const [fastify] = figures(RUN);
    expect(fastify!.title).toBe('Fastify: CPU µs the limiter adds per request');
    // Ours first, then the floor, then the Redis peer; rlf is the line, not a bar.
    expect(fastify!.bars).toEqual([
      { label: 'nrl-tb', kind: 'ours', rlf: 12 / 16, floor: 12 / 8 },
      { label: 'nrl-gcra', kind: 'ours', rlf: 24 / 16, floor: 24 / 8 },
      { label: 'floor-redis', kind: 'floor', rlf: 8 / 16, floor: NaN },
      { label: 'throttler-redis', kind: 'peer', rlf: 20 / 16, floor: 20 / 8 },
    ]);
    expect(fastify!.targets.map((t) => [t.at, t.of])).toEqual([
      [0.75, 'rlf'],
      [1.3, 'floor'],
    ]);
  });

  it('gives the store figures at c=16: decisions/s (higher is better) and Redis µs', () => {
    const [, express, perSecond, usec] = figures(RUN);
    expect(express!.targets).toEqual([]);
    expect(perSecond!.better).toBe('higher');
    expect(perSecond!.bars[0]).toEqual({
      label: 'nrl-gcra',
      kind: 'ours',
      rlf: 24_000 / 30_000,
      floor: 24_000 / 40_000,
    });
    expect(perSecond!.targets.map((t) => t.at)).toEqual([1, 0.7]);
    expect(usec!.bars[0]).toEqual({ label: 'nrl-gcra', kind: 'ours', rlf: 6 / 4, floor: 6 / 1 });
    expect(usec!.bars[1]).toEqual({ label: 'floor', kind: 'floor', rlf: 1 / 4, floor: NaN });
  });

  it('charts a run without the floor (older results) against rlf alone', () => {
    const old = { ...RUN, http: RUN.http!.filter((r) => r.variant !== 'floor-redis') };
    const [fastify] = figures(old);
    expect(fastify!.bars.map((b) => [b.label, b.rlf])).toEqual([
      ['nrl-tb', 0.75],
      ['nrl-gcra', 1.5],
      ['throttler-redis', 1.25],
    ]);
    expect(fastify!.bars.every((b) => Number.isNaN(b.floor))).toBe(true);
  });
});

/**
 * RUN with its Fastify rows also measured at a fixed 5000 req/s: none 50, so the floor adds
 * 30, rlf 40, token bucket 36, GCRA 60; throttler-redis fell short of the rate.
 */
const FIXED_CPU: Record<string, [number, boolean]> = {
  none: [50, true],
  'floor-redis': [80, true],
  'nrl-tb': [86, true],
  'nrl-gcra': [110, true],
  'throttler-redis': [90, false],
  'rlf-redis': [90, true],
};
const WITH_FIXED: ChartResults = {
  ...RUN,
  http: RUN.http!.map((r) => {
    const fixed = r.platform === 'fastify' ? FIXED_CPU[r.variant] : undefined;
    return fixed
      ? { ...r, fixedRate: { targetRps: 5000, cpuUsPerRequest: fixed[0], reached: fixed[1] } }
      : r;
  }),
};

describe('bench chart: the fixed-load figure', () => {
  it('follows the saturated Fastify figure, with the same targets, from the fixed-load CPU', () => {
    const list = figures(WITH_FIXED);
    expect(list.map((f) => f.title)).toEqual([
      'Fastify: CPU µs the limiter adds per request, saturated',
      'Fastify at a fixed 5000 req/s: CPU µs the limiter adds per request',
      'Express: CPU µs the limiter adds per request',
      'Store: decisions/s at c=16',
      'Redis µs per decision (INFO commandstats, c=16)',
    ]);
    const [saturated, fixed] = list;
    // The saturated figure is unchanged by the fixed-load measure beside it.
    expect(saturated!.bars).toEqual(figures(RUN)[0]!.bars);
    expect(fixed!.better).toBe('lower');
    expect(fixed!.bars).toEqual([
      { label: 'nrl-tb', kind: 'ours', rlf: 36 / 40, floor: 36 / 30 },
      { label: 'nrl-gcra', kind: 'ours', rlf: 60 / 40, floor: 60 / 30 },
      { label: 'floor-redis', kind: 'floor', rlf: 30 / 40, floor: NaN },
      // Short of the rate: drawn, but labelled as not comparable.
      { label: 'throttler-redis (short)', kind: 'peer', rlf: 40 / 40, floor: 40 / 30 },
    ]);
    expect(fixed!.targets).toEqual(saturated!.targets);
  });

  it('is left out when none, the floor or rlf fell short: every bar is a ratio to them', () => {
    for (const base of ['none', 'floor-redis', 'rlf-redis']) {
      const run: ChartResults = {
        ...WITH_FIXED,
        http: WITH_FIXED.http!.map((r) =>
          r.platform === 'fastify' && r.variant === base && r.fixedRate
            ? { ...r, fixedRate: { ...r.fixedRate, reached: false } }
            : r,
        ),
      };
      expect(figures(run).map((f) => f.title)).not.toContain(
        'Fastify at a fixed 5000 req/s: CPU µs the limiter adds per request',
      );
    }
  });

  it('is left out of a run without fixed-load measures, and drawn as a group of its own', () => {
    expect(figures(RUN).map((f) => f.title)).not.toContain(
      'Fastify at a fixed 5000 req/s: CPU µs the limiter adds per request',
    );
    const svg = renderChart(WITH_FIXED);
    expect(svg).toContain(
      '>Fastify at a fixed 5000 req/s: CPU µs the limiter adds per request</text>',
    );
    const fixedBars = bars(svg).filter((b) => b.figure === 1 && b.of === 'rlf');
    expect(fixedBars.map((b) => b.ratio)).toEqual([0.9, 1.5, 0.75, 1]);
    const targets = [...svg.matchAll(/data-at="([^"]+)" data-of="(\w+)"/g)].map((m) => [
      Number(m[1]),
      m[2],
    ]);
    // The saturated Fastify figure's two targets, again on the fixed-load one, then the store's.
    expect(targets).toEqual([
      [0.75, 'rlf'],
      [1.3, 'floor'],
      [0.75, 'rlf'],
      [1.3, 'floor'],
      [1, 'rlf'],
      [0.7, 'rlf'],
      [1, 'rlf'],
    ]);
  });
});

describe('bench chart: the @base rows of BENCH_BASELINE', () => {
  /** RUN with each of ours also on the baseline's build: nrl-tb@base adds 20, nrl-gcra@base 16. */
  const WITH_BASE: ChartResults = {
    ...RUN,
    baseline: { ref: 'HEAD~3', commit: 'a22c93b7b7d3049865d546d1b8509d4175105729' },
    http: RUN.http!.flatMap((r) =>
      r.platform === 'fastify' && r.variant.startsWith('nrl-')
        ? [
            r,
            {
              ...r,
              variant: `${r.variant}@base`,
              cpuUsPerRequest: r.variant === 'nrl-tb' ? 60 : 56,
            },
          ]
        : [r],
    ),
    store: [
      ...RUN.store!,
      { contender: 'nrl-gcra@base', perSecond: { 1: 2000, 16: 20_000 }, usecPerCall: 8 },
    ],
  };

  it('gives each its ratios, as a bar of its own kind right after its twin', () => {
    const [fastify, , perSecond] = figures(WITH_BASE);
    expect(fastify!.bars).toEqual([
      { label: 'nrl-tb', kind: 'ours', rlf: 12 / 16, floor: 12 / 8 },
      { label: 'nrl-tb@base', kind: 'base', rlf: 20 / 16, floor: 20 / 8 },
      { label: 'nrl-gcra', kind: 'ours', rlf: 24 / 16, floor: 24 / 8 },
      { label: 'nrl-gcra@base', kind: 'base', rlf: 16 / 16, floor: 16 / 8 },
      { label: 'floor-redis', kind: 'floor', rlf: 8 / 16, floor: NaN },
      { label: 'throttler-redis', kind: 'peer', rlf: 20 / 16, floor: 20 / 8 },
    ]);
    // In the JSON after rlf's row, yet drawn beside its twin.
    expect(perSecond!.bars.map((b) => [b.label, b.kind, b.rlf])).toEqual([
      ['nrl-gcra', 'ours', 24_000 / 30_000],
      ['nrl-gcra@base', 'base', 20_000 / 30_000],
      ['floor', 'floor', 40_000 / 30_000],
    ]);
  });

  it('names the baseline in the legend and draws its bars in their own colour', () => {
    const svg = renderChart(WITH_BASE);
    expect(svg).toContain(
      '>@base: the same variant on HEAD~3 (a22c93b7b7d3), measured in the same rounds, below its twin</text>',
    );
    expect(renderChart(RUN)).not.toContain('@base');
    const purple = [...svg.matchAll(/data-ratio="([^"]+)"[^>]*fill="#805ad5"/g)].map((m) =>
      Number(m[1]),
    );
    // nrl-tb@base and nrl-gcra@base (×rlf, ×floor) on Fastify, nrl-gcra@base on each store figure.
    expect(purple).toHaveLength(8);
  });
});

describe('bench chart: the SVG', () => {
  const svg = renderChart(RUN);
  const list = figures(RUN);

  it('draws bars whose widths are proportional to their ratios, on each figure’s own axis', () => {
    const drawn = bars(svg);
    // 4 + 3 bars per HTTP figure and 2 + 1 per store figure (the floor has no ×floor bar).
    expect(drawn.map((b) => b.figure)).toEqual([0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    for (const bar of drawn) {
      const max = axisMax(list[bar.figure]!);
      expect(bar.width).toBeCloseTo((620 * Math.min(bar.ratio, max)) / max, 6);
    }
    const fastify = drawn.filter((b) => b.figure === 0 && b.of === 'rlf');
    expect(fastify.map((b) => b.ratio)).toEqual([0.75, 1.5, 0.5, 1.25]);
    expect(fastify[1]!.width / fastify[0]!.width).toBeCloseTo(2, 9);
  });

  it('draws the 1.0 line and the target lines at their ratios', () => {
    const ones = [...svg.matchAll(/<line class="one" x1="([^"]+)"/g)].map((m) => Number(m[1]));
    expect(ones).toEqual(list.map((f) => 200 + 620 / axisMax(f)));
    const targets = [...svg.matchAll(/data-at="([^"]+)" data-of="(\w+)" x1="([^"]+)"/g)];
    expect(targets.map((m) => [Number(m[1]), m[2]])).toEqual([
      [0.75, 'rlf'],
      [1.3, 'floor'],
      [1, 'rlf'],
      [0.7, 'rlf'],
      [1, 'rlf'],
    ]);
    expect(Number(targets[0]![3])).toBeCloseTo(200 + (620 * 0.75) / axisMax(list[0]!), 9);
  });

  it('names the machine, Node, Redis and the date, escaped for XML', () => {
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg).toContain(
      '>nest-rate-limit against rate-limiter-flexible and the floor, 2026-12-01 08:59 UTC</text>',
    );
    expect(svg).toContain(
      '>AMD EPYC &lt;&amp;&gt;, 2 cores · Node v20.20.2 · Redis 7.0.15 · medians of 3 rounds</text>',
    );
    expect(svg).not.toContain('<&>');
  });

  it(`cuts a ratio beyond ${MAX_AXIS}× at the edge and writes its value`, () => {
    const far: ChartResults = {
      store: [
        { contender: 'floor', perSecond: { 16: 1 }, usecPerCall: 1 },
        { contender: 'nrl-gcra', perSecond: { 16: 1 }, usecPerCall: 12.5 },
        { contender: 'rlf-redis', perSecond: { 16: 1 }, usecPerCall: 5 },
      ],
    };
    const usec = bars(renderChart(far)).filter((b) => b.figure === 1);
    expect(usec.map((b) => [b.of, b.ratio])).toEqual([
      ['rlf', 2.5],
      ['floor', 12.5],
      ['rlf', 0.2],
    ]);
    // An axis of 0 to 5 over 620 px.
    expect(usec[0]!.width).toBeCloseTo(310, 9);
    expect(usec[1]!.width).toBeCloseTo(620, 9);
    expect(usec[2]!.width).toBeCloseTo(24.8, 9);
    expect(renderChart(far)).toContain('>› 12.5× floor</text>');
  });
});
