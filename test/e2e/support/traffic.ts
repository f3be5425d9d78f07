/**
 * Steady traffic for failover tests: a few requests in flight at once, each one measured, until
 * the caller says stop (or a deadline, so a broken test cannot loop for ever).
 */
import { performance } from 'node:perf_hooks';
import { redisCall } from '../../harness/global-setup.js';
import type { AppHandle } from './app.js';

/** One request's answer. */
export interface Sample {
  /** When it was sent, `performance.now()` ms. */
  at: number;
  /** How long it took, ms. */
  ms: number;
  status: number;
  /** The store decided it: the response carries `X-RateLimit-Remaining`. */
  stored: boolean;
  /** `X-RateLimit-Remaining`, when stored. */
  remaining?: number;
  /** `Retry-After`, seconds, when present. */
  retryAfter?: number;
}

/**
 * Runs `concurrency` loops of GET `path` as `user` (`x-user`), pushing every answer to
 * `samples`, until `stop()` holds or `maxMs` has passed; resolves when all loops are done.
 */
export async function trafficUntil(
  h: Pick<AppHandle, 'get'>,
  path: string,
  user: string,
  concurrency: number,
  samples: Sample[],
  stop: () => boolean,
  maxMs: number,
): Promise<void> {
  const deadline = performance.now() + maxMs;
  const loop = async () => {
    while (!stop() && performance.now() < deadline) {
      const at = performance.now();
      const reply = await h.get(path, { 'x-user': user });
      const end = performance.now();
      const remaining = reply.headers.get('x-ratelimit-remaining');
      const retryAfter = reply.headers.get('retry-after');
      samples.push({
        at,
        ms: end - at,
        status: reply.status,
        stored: remaining !== null,
        ...(remaining !== null && { remaining: Number(remaining) }),
        ...(retryAfter !== null && { retryAfter: Number(retryAfter) }),
      });
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
}

/** EVALSHA and EVAL calls the Redis on `port` has run (`INFO commandstats`). */
export async function scriptCalls(port: number): Promise<number> {
  const info = String(await redisCall(port, 'INFO', 'commandstats'));
  const calls = [...info.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)];
  return calls.reduce((n, m) => n + Number(m[1]), 0);
}

/** How often the Redis on `port` answered with error `prefix` (`INFO errorstats`). */
export async function errorCount(port: number, prefix: string): Promise<number> {
  const info = String(await redisCall(port, 'INFO', 'errorstats'));
  return Number(new RegExp(`errorstat_${prefix}:count=(\\d+)`).exec(info)?.[1] ?? 0);
}

/** What a failover under traffic came to (see {@link failoverFigures}). */
/** What a failover test's app process measured (GET /holds of test/failover/app-worker.ts). */
export interface Holds {
  decisions: number;
  maxMs: number;
  slowest: number[];
  loopDelayMaxMs: number;
}

export interface FailoverFigures {
  requests: number;
  /** Answers the store decided (with headers). */
  stored: number;
  /** Admitted without a store answer (fail-open). */
  failOpen: number;
  /** The count the final primary holds: quota - the last `X-RateLimit-Remaining`. */
  count: number;
  /** stored - count: admissions whose write was lost (negative: counted, reply lost). */
  overAdmission: number;
  /** Store answers between the handover and the client's switch to the new primary. */
  splitBrain: number;
  /** Distinct HTTP statuses. */
  statuses: number[];
  /**
   * Slowest request from the handover on, ms, as the sending process saw it: its own
   * event-loop stalls included (the hold itself is measured in the app's process).
   */
  maxMs: number;
  /** Slowest request before the handover, ms (the loaded machine's baseline). */
  healthyMs: number;
  /** Requests from the handover on slower than `boundMs`. */
  overBound: number;
}

/**
 * Figures of a failover run on a route with `quota` far above the traffic (so every store
 * answer admits), handed over at `handover` and switched at `switched` (`performance.now()`).
 */
export function failoverFigures(
  samples: Sample[],
  quota: number,
  handover: number,
  switched: number,
  boundMs: number,
): FailoverFigures {
  const stored = samples.filter((s) => s.stored);
  const count = quota - (stored.at(-1)?.remaining ?? quota);
  const maxOf = (list: Sample[]) => Math.max(0, ...list.map((s) => s.ms));
  return {
    requests: samples.length,
    stored: stored.length,
    failOpen: samples.filter((s) => s.status === 200 && !s.stored).length,
    count,
    overAdmission: stored.length - count,
    splitBrain: stored.filter((s) => s.at >= handover && s.at < switched).length,
    statuses: [...new Set(samples.map((s) => s.status))],
    maxMs: maxOf(samples.filter((s) => s.at >= handover)),
    healthyMs: maxOf(samples.filter((s) => s.at < handover)),
    overBound: samples.filter((s) => s.at >= handover && s.ms > boundMs).length,
  };
}
