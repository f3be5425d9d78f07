/**
 * The overload part's settings from the environment (BENCH_OVERLOAD_*), for run.ts and
 * main.ts alike. See bench/README.md, The overload part.
 */
import type { Baseline } from '../baseline.js';
import type { HttpPlatform } from '../http/index.js';
import type { OverloadBenchOptions } from './index.js';
import { OVERLOAD_VARIANTS } from './index.js';
import { WORKS, type Work } from './work.js';

const list = (value: string | undefined, fallback: readonly string[]) =>
  value ? value.split(',').map((s) => s.trim()) : [...fallback];

function oneOf<T extends string>(name: string, values: string[], known: readonly T[]): T[] {
  const unknown = values.filter((v) => !(known as readonly string[]).includes(v));
  if (unknown.length)
    throw new Error(`${name}: unknown ${unknown.join(', ')} (known: ${known.join(', ')})`);
  return values as T[];
}

/** `cpu=450,pool=700` → { cpu: 450, pool: 700 }. */
function capacities(value: string | undefined): Partial<Record<Work, number>> {
  const out: Partial<Record<Work, number>> = {};
  for (const pair of value ? value.split(',') : []) {
    const [work, rps] = pair.split('=');
    oneOf('BENCH_OVERLOAD_CAPACITY', [work ?? ''], WORKS);
    out[work as Work] = Number(rps);
  }
  return out;
}

export function overloadOptions(
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
  base: Baseline | undefined,
): OverloadBenchOptions {
  return {
    platforms: oneOf(
      'BENCH_OVERLOAD_PLATFORMS',
      list(env.BENCH_OVERLOAD_PLATFORMS, ['fastify', 'express']),
      ['express', 'fastify'] as HttpPlatform[],
    ),
    works: oneOf('BENCH_OVERLOAD_WORK', list(env.BENCH_OVERLOAD_WORK, WORKS), WORKS),
    variants: oneOf(
      'BENCH_OVERLOAD_VARIANTS',
      list(env.BENCH_OVERLOAD_VARIANTS, OVERLOAD_VARIANTS),
      OVERLOAD_VARIANTS,
    ),
    loads: list(env.BENCH_OVERLOAD_LOADS, ['1', '2', '4']).map(Number),
    durationS: Number(env.BENCH_OVERLOAD_DURATION ?? 5),
    recoveryS: Number(env.BENCH_OVERLOAD_RECOVERY ?? 6),
    capacity: capacities(env.BENCH_OVERLOAD_CAPACITY),
    capacityS: Number(env.BENCH_OVERLOAD_CAPACITY_DURATION ?? 3),
    timeoutMs: Number(env.BENCH_OVERLOAD_TIMEOUT_MS ?? 1000),
    maxConnections: Number(env.BENCH_OVERLOAD_CONNECTIONS ?? 1024),
    cpuRounds: Number(env.BENCH_ROUNDS ?? 3),
    cpuDurationS: Number(env.BENCH_RATE_DURATION ?? 3),
    cpuRate: env.BENCH_RATE ? Number(env.BENCH_RATE) : undefined,
    base,
    log,
  };
}
