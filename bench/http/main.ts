/**
 * The HTTP benchmark alone, on a private Redis (redis-server on the PATH) so nothing else
 * competes for it or reads its keys:
 *
 *   npm run build && npx tsc -p bench/tsconfig.json && node bench/dist/http/main.js
 *
 *   BENCH_ROUNDS=3  BENCH_DURATION=4 (seconds per variant per round)  BENCH_CONNECTIONS=64
 *   BENCH_RATE (req/s at the fixed load; default per platform)  BENCH_RATE_DURATION=1.5 (0: skip it)
 *   BENCH_BASELINE (a git ref: @base twins on its build, see ../baseline.ts)
 *   BENCH_VARIANTS (comma-separated HTTP variants, e.g. nrl-tb,nrl-concurrent; default: all)
 */
import { prepareBaseline } from '../baseline.js';
import { startRedis } from '../support.js';
import { runHttpBench } from './index.js';

const env = process.env;
const began = Date.now();
const log = (line: string) => console.log(line);
const base = env.BENCH_BASELINE ? await prepareBaseline(env.BENCH_BASELINE, log) : undefined;
const redis = await startRedis();
try {
  await runHttpBench({
    redisUrl: redis.url,
    rounds: Number(env.BENCH_ROUNDS ?? 3),
    durationS: Number(env.BENCH_DURATION ?? 4),
    connections: Number(env.BENCH_CONNECTIONS ?? 64),
    rate: env.BENCH_RATE ? Number(env.BENCH_RATE) : undefined,
    rateDurationS: Number(env.BENCH_RATE_DURATION ?? 1.5),
    variants: env.BENCH_VARIANTS ? env.BENCH_VARIANTS.split(',') : undefined,
    base,
    log,
  });
  console.log(`total ${((Date.now() - began) / 1000).toFixed(1)} s`);
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await redis.stop();
  base?.remove();
}
