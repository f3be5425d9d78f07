/**
 * The overload part (issue 36): an app whose routes do real work (work.ts) driven past its
 * capacity, behind each kind of protection (app.ts), by an open-loop load in a process of its
 * own (load.ts). Per platform and work:
 *
 * 1. capacity: the req/s `none` serves saturated (8 connections, closed loop), unless given;
 * 2. per variant, one app and one load: half the capacity (unloaded: the reference p99 and
 *    limit), then each load (1×, 2×, 4× the capacity) followed by half the capacity again
 *    (the recovery, traced), 20% critical and 80% sheddable all along;
 * 3. the figures per load (figures.ts) and issue 36's targets at 2×, PASS or FAIL.
 *
 * Then the CPU per request of a trivial route at a fixed load below capacity, the module with
 * `overload` off and on (and their `@base` twins with BENCH_BASELINE), interleaved in rounds.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import type { Baseline } from '../baseline.js';
import { startApp, type App, type AppScript } from '../http/apps.js';
import { DEFAULT_RATES, type HttpPlatform } from '../http/index.js';
import { pacedLoad } from '../http/paced.js';
import { REACHED } from '../http/table.js';
import { DRIVER_CORE, pin } from '../pin.js';
import { median } from '../support.js';
import { isBase, withTwinNames } from '../twins.js';
import type { Sample } from './figures.js';
import { targetsAt2x, variantFigures, type VariantFigures } from './figures.js';
import type { LoadOptions, LoadPhase, LoadResult } from './load.js';
import { cpuTable, loadTable, targetLines } from './table.js';
import { CPU_MS, POOL_HOLD_MS, POOL_SIZE, type Work } from './work.js';

export const OVERLOAD_VARIANTS = ['none', 'under-pressure', 'nrl-static', 'nrl-adaptive'] as const;
/** The CPU figure's variants: the module with `overload` off and on, beside no module. */
const CPU_VARIANTS = ['none', 'nrl-off', 'nrl-overload'] as const;

const APP = fileURLToPath(new URL('./app.js', import.meta.url));
const LOAD = fileURLToPath(new URL('./load.js', import.meta.url));

export interface OverloadBenchOptions {
  platforms: HttpPlatform[];
  works: Work[];
  variants: string[];
  /** Multiples of the capacity. */
  loads: number[];
  /** Seconds per load (and of the unloaded phase). */
  durationS: number;
  /** Seconds at half the capacity after each load. */
  recoveryS: number;
  /** Capacity per work, req/s, instead of measuring it. */
  capacity: Partial<Record<Work, number>>;
  /** Seconds of the saturated run that measures the capacity. */
  capacityS: number;
  /** The client gives a request up this many ms after it was due. */
  timeoutMs: number;
  maxConnections: number;
  /** The CPU figure: rounds, seconds per variant per round (0: skip it), rate (default per platform). */
  cpuRounds: number;
  cpuDurationS: number;
  cpuRate?: number;
  base?: Baseline;
  log: (line: string) => void;
}

export interface CpuRow {
  platform: HttpPlatform;
  variant: string;
  rateRps: number;
  /** Medians over the rounds. */
  rps: number;
  cpuUsPerRequest: number;
  rounds: number[];
  non2xx: number;
}

export interface OverloadResults {
  runs: { platform: HttpPlatform; work: Work; capacityRps: number; variants: VariantFigures[] }[];
  cpu: CpuRow[];
  /** Median over rounds of nrl-overload's CPU µs per request minus nrl-off's, per platform. */
  overloadCostUs: Partial<Record<HttpPlatform, number>>;
}

const script = (work: Work, urlPath = '/work/sheddable'): AppScript => ({
  path: APP,
  args: [work],
  urlPath,
});

/** Runs load.ts in a process of its own and returns what it printed. */
function load(options: LoadOptions): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [LOAD, JSON.stringify(options)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    pin(child.pid, DRIVER_CORE);
    const kill = () => child.kill('SIGKILL');
    process.once('exit', kill);
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.once('error', reject);
    child.once('close', (code) => {
      process.off('exit', kill);
      if (code !== 0) return reject(new Error(`the load exited with ${code}`));
      resolve(JSON.parse(out) as LoadResult);
    });
  });
}

/** The samples the app took since the last ask (app.ts). */
function samplesOf(app: App): Promise<Sample[]> {
  return new Promise((resolve) => {
    app.child.once('message', (samples) => resolve(samples as Sample[]));
    app.child.send('samples');
  });
}

/** req/s of a saturated closed-loop run, as the capacity. */
async function saturated(url: string, durationS: number): Promise<number> {
  const result = await autocannon({ url, connections: 8, duration: durationS, pipelining: 1 });
  return result.requests.average;
}

async function measureCapacity(
  platform: HttpPlatform,
  work: Work,
  opts: OverloadBenchOptions,
): Promise<number> {
  const given = opts.capacity[work];
  if (given) return given;
  const app = await startApp(platform, 'none', '-', undefined, script(work));
  try {
    await saturated(app.url, 1);
    const rps = await saturated(app.url, opts.capacityS);
    app.assertAlive();
    return rps;
  } finally {
    await app.stop();
  }
}

async function runVariant(
  platform: HttpPlatform,
  work: Work,
  variant: string,
  capacityRps: number,
  opts: OverloadBenchOptions,
): Promise<VariantFigures> {
  const app = await startApp(platform, variant, '-', undefined, script(work));
  try {
    const half = capacityRps / 2;
    const phases: LoadPhase[] = [
      { rateRps: half, durationS: 1 }, // warm-up, not reported
      { rateRps: half, durationS: opts.durationS },
      ...opts.loads.flatMap((load) => [
        { rateRps: load * capacityRps, durationS: opts.durationS, trace: true },
        { rateRps: half, durationS: opts.recoveryS, trace: true },
      ]),
    ];
    const result = await load({
      origin: new URL(app.url).origin,
      phases,
      criticalEvery: 5,
      timeoutMs: opts.timeoutMs,
      maxConnections: opts.maxConnections,
    });
    app.assertAlive();
    const samples = await samplesOf(app);
    if (variant === 'nrl-adaptive' && !samples.some((s) => s.limit !== undefined))
      opts.log(
        `${platform}, ${work}: nrl-adaptive's metrics have no overload limit gauge: its limit back is left out (–)`,
      );
    const startsMs = phases.map(
      (_, i) => result.startedAtMs + 1000 * phases.slice(0, i).reduce((s, p) => s + p.durationS, 0),
    );
    return variantFigures({
      variant,
      capacityRps,
      unloaded: result.phases[1]!,
      loads: opts.loads.map((load, i) => ({
        load,
        phase: result.phases[2 + 2 * i]!,
        recovery: result.phases[3 + 2 * i]!,
        startedAtMs: startsMs[2 + 2 * i]!,
        droppedAtMs: startsMs[3 + 2 * i]!,
      })),
      samples,
    });
  } finally {
    await app.stop();
  }
}

/** CPU per request of `GET /hi` at a fixed load, the module's overload off and on. */
async function runCpu(
  platform: HttpPlatform,
  opts: OverloadBenchOptions,
): Promise<{ rows: CpuRow[]; costUs: number | undefined }> {
  const rate = opts.cpuRate ?? DEFAULT_RATES[platform];
  const names = opts.base ? withTwinNames([...CPU_VARIANTS]) : [...CPU_VARIANTS];
  const apps: App[] = [];
  try {
    for (const variant of names) {
      try {
        apps.push(
          await startApp(
            platform,
            variant,
            '-',
            isBase(variant) ? opts.base?.entry : undefined,
            script('cpu', '/hi'),
          ),
        );
      } catch (error) {
        // nrl-overload needs the overload API; a build without it (a baseline's) is left out.
        const reason =
          error instanceof Error ? error.message.split('\n').slice(0, 3).join(' ') : String(error);
        opts.log(`${platform}: ${variant} left out, it did not start: ${reason.slice(0, 300)}`);
        if (variant === 'none' || variant === 'nrl-off') throw error;
      }
    }
    for (const app of apps) await pacedLoad(app.url, rate, 1, 64);
    const samples = new Map(
      apps.map((a) => [a.variant, [] as { rps: number; us: number; non2xx: number }[]]),
    );
    for (let round = 0; round < opts.cpuRounds; round++) {
      for (let i = 0; i < apps.length; i++) {
        const app = apps[(round + i) % apps.length]!;
        const before = app.cpuUs();
        const s = await pacedLoad(app.url, rate, opts.cpuDurationS, 64);
        const us = (app.cpuUs() - before) / s.requests;
        app.assertAlive();
        samples.get(app.variant)!.push({ rps: s.rps, us, non2xx: s.non2xx });
      }
      opts.log(
        `${platform} CPU round ${round + 1}/${opts.cpuRounds} at ${rate} req/s, µs/req: ${apps
          .map((a) => `${a.variant} ${samples.get(a.variant)![round]!.us.toFixed(1)}`)
          .join(', ')}`,
      );
    }
    const rows = [...samples].map(([variant, s]): CpuRow => ({
      platform,
      variant,
      rateRps: rate,
      rps: median(s.map((x) => x.rps)),
      cpuUsPerRequest: median(s.map((x) => x.us)),
      rounds: s.map((x) => x.rps),
      non2xx: s.reduce((sum, x) => sum + x.non2xx, 0),
    }));
    const on = samples.get('nrl-overload');
    const off = samples.get('nrl-off')!;
    // Paired within each round: both ran seconds apart. At a lower rate than the other, a
    // variant pays more fixed costs per request: no figure then.
    const short = (s: { rps: number }[]) => s.some((x) => x.rps < REACHED * rate);
    const costUs =
      on && !short(on) && !short(off) ? median(on.map((x, r) => x.us - off[r]!.us)) : undefined;
    return { rows, costUs };
  } finally {
    await Promise.all(apps.map((a) => a.stop()));
  }
}

export async function runOverloadBench(opts: OverloadBenchOptions): Promise<OverloadResults> {
  const results: OverloadResults = { runs: [], cpu: [], overloadCostUs: {} };
  for (const platform of opts.platforms) {
    for (const work of opts.works) {
      const capacityRps = await measureCapacity(platform, work, opts);
      const shape =
        work === 'cpu'
          ? `${CPU_MS} ms of CPU per request`
          : `${POOL_HOLD_MS} ms on one of ${POOL_SIZE} pool connections per request`;
      opts.log(
        `\noverload, ${platform}, ${work} (${shape}): capacity ${Math.round(capacityRps)} req/s${opts.capacity[work] ? ' (given)' : ''}`,
      );
      const variants: VariantFigures[] = [];
      for (const variant of opts.variants) {
        if (variant === 'under-pressure' && platform !== 'fastify') continue;
        try {
          variants.push(await runVariant(platform, work, variant, capacityRps, opts));
        } catch (error) {
          // Ours needs the overload API, which a build may not have yet: the others still run.
          if (variant !== 'nrl-adaptive') throw error;
          const reason =
            error instanceof Error
              ? error.message.split('\n').slice(0, 4).join(' ')
              : String(error);
          opts.log(`${variant} left out: ${reason.slice(0, 400)}`);
        }
      }
      for (const line of loadTable(variants)) opts.log(line);
      for (const v of variants) for (const line of targetLines(v, targetsAt2x(v))) opts.log(line);
      results.runs.push({ platform, work, capacityRps, variants });
    }
    if (opts.cpuDurationS > 0) {
      const { rows, costUs } = await runCpu(platform, opts);
      for (const line of cpuTable(platform, rows, costUs)) opts.log(line);
      results.cpu.push(...rows);
      if (costUs !== undefined) results.overloadCostUs[platform] = costUs;
    }
  }
  return results;
}
