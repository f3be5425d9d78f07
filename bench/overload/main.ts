/**
 * The overload part alone (no Redis: every protection is per process):
 *
 *   npm run build && npx tsc -p bench/tsconfig.json && node bench/dist/overload/main.js
 *
 * with the BENCH_OVERLOAD_* settings of options.ts, BENCH_ROUNDS, BENCH_RATE,
 * BENCH_RATE_DURATION (the CPU figure) and BENCH_BASELINE (see bench/README.md).
 */
import { prepareBaseline } from '../baseline.js';
import { runOverloadBench } from './index.js';
import { overloadOptions } from './options.js';

const env = process.env;
const began = Date.now();
const log = (line: string) => console.log(line);
const base = env.BENCH_BASELINE ? await prepareBaseline(env.BENCH_BASELINE, log) : undefined;
try {
  await runOverloadBench(overloadOptions(env, log, base));
  log(`total ${((Date.now() - began) / 1000).toFixed(1)} s`);
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  base?.remove();
}
