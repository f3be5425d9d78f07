/**
 * `npm run bench`: every part, one table each, on a private Redis; writes
 * bench/results/<date>.json with the machine facts, and its chart beside it
 * (bench/results/<date>.svg, see chart.ts). See bench/README.md.
 *
 *   BENCH_PARTS=http,store,scripts,memory,hotkey,graphql   which parts (default: these; `overload`,
 *                       issue 36's overload protection, only when named: BENCH_OVERLOAD_*, see
 *                       overload/options.ts)
 *   BENCH_ROUNDS=3      interleaved rounds per part (medians are reported)
 *   BENCH_DURATION=4    seconds per HTTP variant per round
 *   BENCH_CONNECTIONS=64  autocannon connections
 *   BENCH_RATE=         the HTTP part's fixed offered load, req/s (default: 5000 Fastify, 1500 Express)
 *   BENCH_RATE_DURATION=1.5  seconds per HTTP variant per round at that load (0: skip it)
 *   BENCH_BASELINE=     a git ref: each of our variants also runs on that ref's build, as
 *                       `<variant>@base` beside it, in the same rounds (see baseline.ts)
 *   BENCH_VARIANTS=     the HTTP part's variants, comma-separated (default: all; `none` always)
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { prepareBaseline, type Baseline } from './baseline.js';
import { writeChart } from './chart.js';
import { runGraphQLBench } from './graphql/analysis.js';
import { runHttpBench } from './http/index.js';
import { runOverloadBench } from './overload/index.js';
import { overloadOptions } from './overload/options.js';
import { BUSY, contenders, newClient } from './redis/contenders.js';
import { runHotKeyBench } from './redis/hotkey.js';
import { runMemoryBench } from './redis/memory.js';
import { layoutProbes } from './redis/layouts.js';
import { runScriptBench } from './redis/scripts.js';
import { runStoreBench } from './redis/store.js';
import { DRIVER_CORE, MEASURED_CORE, pin, PINNING, pinningLine } from './pin.js';
import { startRedis } from './support.js';

const env = process.env;
const parts = new Set((env.BENCH_PARTS ?? 'http,store,scripts,memory,hotkey,graphql').split(','));
const rounds = Number(env.BENCH_ROUNDS ?? 3);
const log = (line: string) => console.log(line);
const began = Date.now();

// Built before anything is measured; removed at the end, whatever happens (also on exit).
const base: Baseline | undefined = env.BENCH_BASELINE
  ? await prepareBaseline(env.BENCH_BASELINE, log)
  : undefined;
pin(process.pid, DRIVER_CORE);
const redis = await startRedis();
const admin = newClient(redis.url);
const results: Record<string, unknown> = {};
try {
  const info = await admin.info('server');
  const machine = {
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
    platform: `${process.platform} ${process.arch}`,
    pinned: PINNING,
  };
  log(`nest-rate-limit benchmarks, ${new Date().toISOString()}`);
  log(
    `${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB; Node ${machine.node}; Redis ${machine.redis}`,
  );
  log(pinningLine());
  results.date = new Date().toISOString();
  results.machine = machine;
  results.rounds = rounds;
  if (base) {
    log(`@base: the same variant on ${base.ref} (${base.commit.slice(0, 12)}), interleaved`);
    results.baseline = { ref: base.ref, commit: base.commit, lockDiffers: base.lockDiffers };
  }

  if (parts.has('http')) {
    // The app is the process measured: Redis runs beside the load generator.
    pin(redis.pid, DRIVER_CORE);
    results.http = await runHttpBench({
      redisUrl: redis.url,
      rounds,
      durationS: Number(env.BENCH_DURATION ?? 4),
      connections: Number(env.BENCH_CONNECTIONS ?? 64),
      rate: env.BENCH_RATE ? Number(env.BENCH_RATE) : undefined,
      rateDurationS: Number(env.BENCH_RATE_DURATION ?? 1.5),
      variants: env.BENCH_VARIANTS ? env.BENCH_VARIANTS.split(',') : undefined,
      base,
      log,
    });
  }
  // From here Redis (or this process's client against it) is what is measured.
  pin(redis.pid, MEASURED_CORE);
  if (parts.has('store')) {
    results.store = await runStoreBench({
      redisUrl: redis.url,
      rounds,
      concurrencies: [1, 16, 256],
      decisions: (c) => (c === 1 ? 3000 : 20_000),
      identities: 10_000,
      base,
      log,
    });
  }
  if (parts.has('scripts')) {
    results.scripts = await runScriptBench({
      admin,
      port: redis.port,
      contenders: contenders(admin, BUSY, base),
      rounds,
      requests: 50_000,
      probes: layoutProbes(BUSY.limit, BUSY.periodS * 1000),
      log,
    });
  }
  if (parts.has('memory')) {
    // A budget whose state outlives the measurement: a GCRA key lives only as long as its
    // debt (36 s after one request at 100/h), a window key for the window.
    results.memory = await runMemoryBench({
      admin,
      contenders: contenders(admin, { limit: 100, periodS: 3600 }, base),
      identities: 2000,
      log,
    });
  }
  if (parts.has('hotkey')) {
    results.hotKey = await runHotKeyBench({
      admin,
      contenders: contenders(admin, { ...BUSY, withDenyCache: true }, base),
      decisions: 30_000,
      concurrency: 64,
      log,
    });
  }
  if (parts.has('graphql')) {
    results.graphql = await runGraphQLBench({ rounds, operations: 3000, log });
  }
  if (parts.has('overload')) {
    results.overload = await runOverloadBench(overloadOptions(env, log, base));
  }
  const seconds = (Date.now() - began) / 1000;
  results.seconds = seconds;
  const dir = fileURLToPath(new URL('../results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = `${dir}${new Date().toISOString().slice(0, 10)}.json`;
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  const chart = writeChart(results, file);
  log(`\nwrote ${file} and ${chart}; ${seconds.toFixed(0)} s in all`);
} finally {
  admin.disconnect();
  await redis.stop();
  base?.remove();
}
