/**
 * The HTTP overhead of a limiter: the same one-route Nest app behind each variant (see
 * app.ts), loaded with autocannon from this process while the app runs in its own. Rounds
 * interleave the variants, each round starting one further along, so drift (thermal,
 * background load, Redis growing) spreads over all of them instead of biasing whoever runs
 * first or last; the median over rounds is reported, against `none` on the same platform.
 *
 * Each round loads every app twice: saturated (autocannon, as fast as the app answers), then
 * at a fixed offered load, the same for all variants of a platform (paced.ts). CPU per
 * request depends on the load itself (at a lower rate, fewer requests share each
 * event-loop turn and each syscall), so at saturation a slower variant is also charged for
 * its slowness; at a fixed load every variant does the same number of requests per second
 * and the CPU each adds is its work alone.
 */
import autocannon from 'autocannon';
import type { Baseline } from '../baseline.js';
import { median } from '../support.js';
import { isBase, withTwinNames } from '../twins.js';
import { startApp, type App } from './apps.js';
import { DECIDED_HEADER, pacedLoad, type PacedSample } from './paced.js';
import { fixedRateTable, REACHED, saturatedTable } from './table.js';

const HTTP_PLATFORMS = ['express', 'fastify'] as const;
export type HttpPlatform = (typeof HTTP_PLATFORMS)[number];
const HTTP_VARIANTS = [
  'none',
  'floor-redis',
  // Issue 23: the floor on other client settings (bench/floor.ts, FLOOR_CLIENTS).
  'floor-redis-autopipelining',
  'floor-redis-defaults',
  'nrl-tb',
  // Issue 21: the token bucket with prom-client metrics and an onDecision hook on.
  'nrl-tb-observed',
  'nrl-gcra',
  'nrl-sw',
  'nrl-stacked',
  'nrl-memory',
  // Issue 15's features, one each: refund on success, a penalty that never fires, a slot.
  'nrl-count-failed',
  'nrl-block',
  'nrl-concurrent',
  'throttler-memory',
  'throttler-redis',
  'rlf-redis',
] as const;
export type HttpVariant = (typeof HTTP_VARIANTS)[number];

export interface HttpRow {
  platform: HttpPlatform;
  variant: string;
  /** Medians over the rounds. */
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /**
   * Against `none` on the same platform: rps variant/none, paired within each round (both ran
   * minutes apart at most) then the median; latencies variant/none of the medians.
   */
  rpsRatio: number;
  p50Ratio: number;
  p99Ratio: number;
  /** Requests per second of each round, in round order. */
  rounds: number[];
  /**
   * CPU time of the app process per request, in µs (median over rounds; Linux, from
   * /proc): what the variant costs the app, whatever else the machine was doing.
   */
  cpuUsPerRequest: number;
  /** The app's CPU per request in each round, in µs, in round order (the ratios pair them). */
  cpuRounds: number[];
  /** Responses other than 2xx plus requests that got no response, over all rounds. */
  non2xx: number;
  /** 2xx responses answered without a decision, over all rounds (see {@link PacedSample.undecided}). */
  undecided: number;
  /** The same at the fixed offered load; absent when none was measured. */
  fixedRate?: FixedRateFigures;
}

/** A variant at the fixed offered load of its platform: medians over the rounds. */
interface FixedRateFigures {
  /** The rate offered, in requests per second. */
  targetRps: number;
  /** The rate answered, in requests per second. */
  rps: number;
  /**
   * Whether every round answered at least 97% of `targetRps`. When not, the app could not
   * keep up and its CPU per request was measured at a lower load than the others': not
   * comparable.
   */
  reached: boolean;
  /** CPU time of the app process per request, in µs, as {@link HttpRow.cpuUsPerRequest}. */
  cpuUsPerRequest: number;
  /** The same in each round, in round order. */
  cpuRounds: number[];
  p50Ms: number;
  p99Ms: number;
  /** Requests per second answered in each round, in round order. */
  rounds: number[];
  /** Responses other than 2xx plus requests that got no response, over all rounds. */
  non2xx: number;
  /** 2xx responses answered without a decision, over all rounds (see {@link PacedSample.undecided}). */
  undecided: number;
}

/**
 * The fixed offered load per platform, in requests per second: what every variant but
 * throttler-memory (which slows down as a run goes on) sustains with a margin on a busy
 * 2-core machine; Express serves a third to a half of what Fastify does.
 */
export const DEFAULT_RATES: Record<HttpPlatform, number> = { express: 1500, fastify: 5000 };

export interface HttpBenchOptions {
  redisUrl: string;
  platforms?: HttpPlatform[];
  /** Default: all of {@link HTTP_VARIANTS}; `none` is always added, as the baseline. */
  variants?: string[];
  rounds: number;
  durationS: number;
  /** Default 64, at saturation and at the fixed load alike. */
  connections?: number;
  /** The fixed offered load, in requests per second, for every platform; default {@link DEFAULT_RATES}. */
  rate?: number;
  /** Seconds per variant per round at the fixed load; 0 skips it. Default 1.5. */
  rateDurationS?: number;
  /**
   * BENCH_BASELINE's build: each of ours (`nrl-*`) gets an `@base` twin on it, right after it
   * in the rounds and the tables. A twin that does not start is left out, with a line.
   */
  base?: Baseline;
  log: (line: string) => void;
}

const WARMUP_S = 1;
/**
 * Apps booting at once, at most: more than a dozen together (twice as many with
 * BENCH_BASELINE) on a busy 2-core machine can keep one from listening within its timeout.
 */
const BOOTING = 8;

/** `run` of every item, `limit` at a time, settled in the items' order. */
async function settledAtMost<T, R>(
  limit: number,
  items: readonly T[],
  run: (item: T) => Promise<R>,
): Promise<PromiseSettledResult<R>[]> {
  const settled: PromiseSettledResult<R>[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        settled[i] = await run(items[i]!).then(
          (value) => ({ status: 'fulfilled', value }) as const,
          (reason: unknown) => ({ status: 'rejected', reason }) as const,
        );
      }
    }),
  );
  return settled;
}

/** A load's figures (autocannon's or the paced one's) and the app's CPU time meanwhile, in µs. */
type Sample = PacedSample & { cpuUs: number };

/** Nearest-rank percentile of ascending values. */
function percentile(sorted: Float64Array, q: number): number {
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

async function load(url: string, durationS: number, connections: number): Promise<PacedSample> {
  // autocannon's own histogram keeps whole milliseconds, too coarse at a few ms per request.
  const latencies: number[] = [];
  let undecided = 0;
  const path = new URL(url).pathname;
  const onResponse = (status: number, _body: string, _ctx: object, headers?: object) => {
    // Header names as the server wrote them: Express keeps `X-RateLimit-Remaining`.
    const decided = Object.keys(headers ?? {}).some(
      (name) => name.toLowerCase() === DECIDED_HEADER,
    );
    if (status >= 200 && status < 300 && !decided) undecided++;
  };
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections,
        duration: durationS,
        pipelining: 1,
        requests: [{ method: 'GET', path, onResponse }],
      },
      (error: unknown, res: autocannon.Result) => (error ? reject(error) : resolve(res)),
    );
    instance.on('response', (_client, _status, _bytes, ms) => latencies.push(ms));
  });
  const sorted = Float64Array.from(latencies).sort();
  return {
    rps: result.requests.average,
    requests: result.requests.total,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    non2xx: result.non2xx + result.errors,
    undecided,
  };
}

/** One load of an app, with the CPU time the app spent meanwhile. */
async function measured(app: App, run: () => Promise<PacedSample>): Promise<Sample> {
  const cpuBefore = app.cpuUs();
  const sample = await run();
  const cpuUs = app.cpuUs() - cpuBefore;
  app.assertAlive();
  return { ...sample, cpuUs };
}

/** Runs the benchmark, logs two tables per platform, and returns every row. */
export async function runHttpBench(opts: HttpBenchOptions): Promise<HttpRow[]> {
  const connections = opts.connections ?? 64;
  const unknown = (opts.variants ?? []).filter(
    (v) => !(HTTP_VARIANTS as readonly string[]).includes(v),
  );
  if (unknown.length) throw new Error(`unknown HTTP variants: ${unknown.join(', ')}`);
  const chosen = ['none', ...(opts.variants ?? HTTP_VARIANTS).filter((v) => v !== 'none')];
  const variants = opts.base ? withTwinNames(chosen) : chosen;
  const rateDurationS = opts.rateDurationS ?? 1.5;
  const rows: HttpRow[] = [];
  for (const platform of opts.platforms ?? HTTP_PLATFORMS) {
    // All apps idle side by side: only the one under load uses the CPU.
    const started = await settledAtMost(BOOTING, variants, (v) =>
      startApp(platform, v, opts.redisUrl, isBase(v) ? opts.base?.entry : undefined),
    );
    const rate = opts.rate ?? DEFAULT_RATES[platform];
    const apps = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    try {
      // A twin the baseline's build cannot make (an option it lacks) is left out; ours must start.
      const failed = started.find((s, i) => s.status === 'rejected' && !isBase(variants[i]!));
      if (failed?.status === 'rejected') throw failed.reason;
      started.forEach((s, i) => {
        if (s.status === 'rejected') {
          const reason = s.reason instanceof Error ? s.reason.message : String(s.reason);
          opts.log(
            `${platform}: ${variants[i]} left out, it did not start on ${opts.base?.ref}: ${reason.split('\n').slice(0, 3).join(' ').slice(0, 300)}`,
          );
        }
      });
      for (const app of apps) await load(app.url, WARMUP_S, connections);
      const samples = new Map(apps.map((app) => [app.variant, [] as Sample[]]));
      const fixed = new Map(apps.map((app) => [app.variant, [] as Sample[]]));
      const roundLog = (round: number, what: string, of: Map<string, Sample[]>) =>
        opts.log(
          `${platform} round ${round + 1}/${opts.rounds} ${what} req/s: ${apps
            .map((a) => `${a.variant} ${Math.round(of.get(a.variant)![round]!.rps)}`)
            .join(', ')}`,
        );
      for (let round = 0; round < opts.rounds; round++) {
        // Each app's saturated load is followed by the others' before its fixed one: what
        // saturation leaves behind (garbage, grown buffers) is not charged to the fixed load.
        for (let i = 0; i < apps.length; i++) {
          const app = apps[(round + i) % apps.length]!;
          samples
            .get(app.variant)!
            .push(await measured(app, () => load(app.url, opts.durationS, connections)));
        }
        roundLog(round, 'saturated', samples);
        if (!rateDurationS) continue;
        for (let i = 0; i < apps.length; i++) {
          const app = apps[(round + i) % apps.length]!;
          fixed
            .get(app.variant)!
            .push(await measured(app, () => pacedLoad(app.url, rate, rateDurationS, connections)));
        }
        roundLog(round, `at ${rate}`, fixed);
      }
      const platformRows = summarise(platform, samples);
      if (rateDurationS) {
        for (const row of platformRows)
          row.fixedRate = summariseFixed(rate, fixed.get(row.variant)!);
      }
      for (const line of saturatedTable(platform, platformRows, connections)) opts.log(line);
      for (const line of fixedRateTable(platform, platformRows, connections)) opts.log(line);
      rows.push(...platformRows);
    } finally {
      await Promise.all(apps.map((app) => app.stop()));
    }
  }
  return rows;
}

function summariseFixed(targetRps: number, s: Sample[]): FixedRateFigures {
  const rps = median(s.map((x) => x.rps));
  return {
    targetRps,
    rps,
    // Every round: one short round feeds the medians as much as the others.
    reached: s.every((x) => x.rps >= REACHED * targetRps),
    cpuUsPerRequest: median(s.map((x) => x.cpuUs / x.requests)),
    cpuRounds: s.map((x) => x.cpuUs / x.requests),
    p50Ms: median(s.map((x) => x.p50Ms)),
    p99Ms: median(s.map((x) => x.p99Ms)),
    rounds: s.map((x) => x.rps),
    non2xx: s.reduce((sum, x) => sum + x.non2xx, 0),
    undecided: s.reduce((sum, x) => sum + x.undecided, 0),
  };
}

function summarise(platform: HttpPlatform, samples: Map<string, Sample[]>): HttpRow[] {
  const none = samples.get('none')!;
  const medians = [...samples].map(([variant, s]) => ({
    variant,
    rps: median(s.map((x) => x.rps)),
    rpsRatio: median(s.map((x, round) => x.rps / none[round]!.rps)),
    cpuUsPerRequest: median(s.map((x) => x.cpuUs / x.requests)),
    cpuRounds: s.map((x) => x.cpuUs / x.requests),
    p50Ms: median(s.map((x) => x.p50Ms)),
    p99Ms: median(s.map((x) => x.p99Ms)),
    rounds: s.map((x) => x.rps),
    non2xx: s.reduce((sum, x) => sum + x.non2xx, 0),
    undecided: s.reduce((sum, x) => sum + x.undecided, 0),
  }));
  const baseline = medians.find((m) => m.variant === 'none')!;
  return medians.map((m) => ({
    platform,
    ...m,
    p50Ratio: m.p50Ms / baseline.p50Ms,
    p99Ratio: m.p99Ms / baseline.p99Ms,
  }));
}
