/**
 * The HTTP overhead of a limiter: the same one-route Nest app behind each variant (see
 * app.ts), loaded with autocannon from this process while the app runs in its own. Rounds
 * interleave the variants, each round starting one further along, so drift (thermal,
 * background load, Redis growing) spreads over all of them instead of biasing whoever runs
 * first or last; the median over rounds is reported, against `none` on the same platform.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { freePort, median } from '../support.js';

export const HTTP_PLATFORMS = ['express', 'fastify'] as const;
export type HttpPlatform = (typeof HTTP_PLATFORMS)[number];
export const HTTP_VARIANTS = [
  'none',
  'floor-redis',
  'nrl-tb',
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
  /** Responses other than 2xx plus requests that got no response, over all rounds. */
  non2xx: number;
}

export interface HttpBenchOptions {
  redisUrl: string;
  platforms?: HttpPlatform[];
  /** Default: all of {@link HTTP_VARIANTS}; `none` is always added, as the baseline. */
  variants?: string[];
  rounds: number;
  durationS: number;
  /** Default 64. */
  connections?: number;
  log: (line: string) => void;
}

const APP = fileURLToPath(new URL('./app.js', import.meta.url));
// All apps boot side by side (ten and more on two cores): on a busy machine that takes a while.
const READY_TIMEOUT_MS = 60_000;
const WARMUP_S = 1;

/** Apps still running, killed should this process exit without stopping them. */
const running = new Set<ChildProcess>();
let exitHooked = false;

function killOnExit(child: ChildProcess): void {
  // One listener for all: one per app would trip Node's MaxListeners warning.
  if (!exitHooked) process.once('exit', () => running.forEach((c) => c.kill('SIGKILL')));
  exitHooked = true;
  running.add(child);
  child.once('exit', () => running.delete(child));
}

interface App {
  variant: string;
  /** CPU time the app has used so far, in µs (NaN where /proc is missing). */
  cpuUs(): number;
  url: string;
  /** Throws, with the app's output, when it has died. */
  assertAlive(): void;
  stop(): Promise<void>;
}

async function startApp(platform: HttpPlatform, variant: string, redisUrl: string): Promise<App> {
  const port = await freePort();
  // The IPC channel lets the app notice when this process dies without stopping it.
  const child = spawn(process.execPath, [APP, platform, variant, String(port), redisUrl], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const output: string[] = [];
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const dead = () => child.exitCode !== null || child.signalCode !== null;
  const kill = () => child.kill('SIGKILL');
  killOnExit(child);
  const describe = () => `${variant} on ${platform}`;
  const app: App = {
    variant,
    cpuUs: () => processCpuUs(child.pid),
    url: `http://127.0.0.1:${port}/hi`,
    assertAlive() {
      if (dead())
        throw new Error(
          `${describe()} died (${child.exitCode ?? child.signalCode}):\n${output.join('')}`,
        );
    },
    async stop() {
      if (!dead()) {
        child.kill('SIGTERM');
        const timer = setTimeout(kill, 2000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`${describe()} not ready in ${READY_TIMEOUT_MS} ms:\n${output.join('')}`),
          ),
        READY_TIMEOUT_MS,
      );
      // Piped, as stdio says; the four-slot form of spawn() types them as nullable.
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => output.push(chunk));
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        output.push(chunk);
        if (/^ready$/m.test(output.join(''))) {
          clearTimeout(timer);
          resolve();
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`${describe()} exited before ready:\n${output.join('')}`));
      });
    });
  } catch (error) {
    await app.stop();
    throw error;
  }
  return app;
}

/** utime + stime of a process, in µs, from /proc/<pid>/stat (ticks of 1/100 s). */
function processCpuUs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return NaN;
  }
}

interface Sample {
  rps: number;
  requests: number;
  cpuUs: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
}

/** Nearest-rank percentile of ascending values. */
function percentile(sorted: Float64Array, q: number): number {
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

async function load(url: string, durationS: number, connections: number): Promise<Sample> {
  // autocannon's own histogram keeps whole milliseconds, too coarse at a few ms per request.
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      { url, connections, duration: durationS, pipelining: 1 },
      (error: unknown, res: autocannon.Result) => (error ? reject(error) : resolve(res)),
    );
    instance.on('response', (_client, _status, _bytes, ms) => latencies.push(ms));
  });
  const sorted = Float64Array.from(latencies).sort();
  return {
    rps: result.requests.average,
    requests: result.requests.total,
    cpuUs: 0,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    non2xx: result.non2xx + result.errors,
  };
}

/** Runs the benchmark, logs one table per platform, and returns every row. */
export async function runHttpBench(opts: HttpBenchOptions): Promise<HttpRow[]> {
  const connections = opts.connections ?? 64;
  const unknown = (opts.variants ?? []).filter(
    (v) => !(HTTP_VARIANTS as readonly string[]).includes(v),
  );
  if (unknown.length) throw new Error(`unknown HTTP variants: ${unknown.join(', ')}`);
  const variants = ['none', ...(opts.variants ?? HTTP_VARIANTS).filter((v) => v !== 'none')];
  const rows: HttpRow[] = [];
  for (const platform of opts.platforms ?? HTTP_PLATFORMS) {
    // All apps idle side by side: only the one under load uses the CPU.
    const started = await Promise.allSettled(
      variants.map((v) => startApp(platform, v, opts.redisUrl)),
    );
    const apps = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    try {
      const failed = started.find((s) => s.status === 'rejected');
      if (failed) throw failed.reason;
      for (const app of apps) await load(app.url, WARMUP_S, connections);
      const samples = new Map(apps.map((app) => [app.variant, [] as Sample[]]));
      for (let round = 0; round < opts.rounds; round++) {
        for (let i = 0; i < apps.length; i++) {
          const app = apps[(round + i) % apps.length]!;
          const cpuBefore = app.cpuUs();
          const sample = await load(app.url, opts.durationS, connections);
          sample.cpuUs = app.cpuUs() - cpuBefore;
          app.assertAlive();
          samples.get(app.variant)!.push(sample);
        }
        const done = apps.map(
          (a) => `${a.variant} ${Math.round(samples.get(a.variant)![round]!.rps)}`,
        );
        opts.log(`${platform} round ${round + 1}/${opts.rounds} req/s: ${done.join(', ')}`);
      }
      const platformRows = summarise(platform, samples);
      for (const line of table(platform, platformRows, connections)) opts.log(line);
      rows.push(...platformRows);
    } finally {
      await Promise.all(apps.map((app) => app.stop()));
    }
  }
  return rows;
}

function summarise(platform: HttpPlatform, samples: Map<string, Sample[]>): HttpRow[] {
  const none = samples.get('none')!;
  const medians = [...samples].map(([variant, s]) => ({
    variant,
    rps: median(s.map((x) => x.rps)),
    rpsRatio: median(s.map((x, round) => x.rps / none[round]!.rps)),
    cpuUsPerRequest: median(s.map((x) => x.cpuUs / x.requests)),
    p50Ms: median(s.map((x) => x.p50Ms)),
    p99Ms: median(s.map((x) => x.p99Ms)),
    rounds: s.map((x) => x.rps),
    non2xx: s.reduce((sum, x) => sum + x.non2xx, 0),
  }));
  const baseline = medians.find((m) => m.variant === 'none')!;
  return medians.map((m) => ({
    platform,
    ...m,
    p50Ratio: m.p50Ms / baseline.p50Ms,
    p99Ratio: m.p99Ms / baseline.p99Ms,
  }));
}

function table(platform: HttpPlatform, rows: HttpRow[], connections: number): string[] {
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
  const cpu = (variant: string) => rows.find((r) => r.variant === variant)?.cpuUsPerRequest ?? NaN;
  const cpuNone = cpu('none');
  // What the floor and the peer add: each variant's +µs is read as a multiple of theirs.
  const floorAdded = cpu('floor-redis') - cpuNone;
  const rlfAdded = cpu('rlf-redis') - cpuNone;
  // A base of 0 or less (noise on a variant that adds next to nothing) gives no ratio.
  const times = (added: number, base: number) => (base > 0 ? (added / base).toFixed(2) : '–');
  const body = rows.map((r) => [
    r.non2xx ? `${r.variant} !` : r.variant,
    r.rps.toFixed(0),
    r.rpsRatio.toFixed(2),
    r.p50Ms.toFixed(2),
    r.p50Ratio.toFixed(2),
    r.p99Ms.toFixed(2),
    r.p99Ratio.toFixed(2),
    r.cpuUsPerRequest.toFixed(1),
    (r.cpuUsPerRequest - cpuNone).toFixed(1),
    r.variant === 'none' ? '' : times(r.cpuUsPerRequest - cpuNone, floorAdded),
    r.variant === 'none' ? '' : times(r.cpuUsPerRequest - cpuNone, rlfAdded),
    r.rounds.map((x) => x.toFixed(0)).join(' '),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((cells) => cells[i]!.length)));
  // Names and the last column read left to right; numbers line up on the right.
  const format = (cells: string[]) =>
    cells
      .map((c, i) =>
        i === 0 || i === cells.length - 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!),
      )
      .join('  ')
      .trimEnd();
  const flagged = rows.filter((r) => r.non2xx);
  return [
    `HTTP ${platform}, ${connections} connections, median of ${rows[0]?.rounds.length ?? 0} rounds (×none paired per round; CPU: the app process's own, per request; +µs: CPU added over none, ×floor and ×rlf: as a multiple of what floor-redis and rlf-redis add):`,
    format(header),
    ...body.map(format),
    ...(flagged.length
      ? [
          `! non-2xx or failed requests: ${flagged.map((r) => `${r.variant} ${r.non2xx}`).join(', ')}`,
        ]
      : []),
  ];
}
