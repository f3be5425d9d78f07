import type { RateLimitFields } from './fields.js';
import { clientOptionError } from './option-error.js';

/** When and how long to wait before sending a refused request again. Durations in **ms**. */
export interface RetryOptions {
  /** Attempts in all, the first included. Default 4. */
  maxAttempts?: number;
  /**
   * The longest the client waits in all for one request, **ms**, pacing included. A wait that
   * would pass it is not started: the client gives up at once with the response. Default 60,000.
   */
  maxWaitMs?: number;
  /** The first backoff when the response has no `Retry-After`, **ms**; doubled per attempt. Default 500. */
  baseDelayMs?: number;
  /** The longest single backoff without `Retry-After`, **ms**. Default 30,000. */
  maxDelayMs?: number;
  /**
   * Jitter added to a `Retry-After` wait, **ms**: a random share of it, so that clients refused
   * together do not come back in the same instant. Default 1,000. (A backoff without
   * `Retry-After` is jittered over its whole length: "full jitter".)
   */
  jitterMs?: number;
  /** The statuses that are retried. Default `[429, 503]`. */
  statuses?: readonly number[];
  /**
   * The header that makes a non-idempotent request (POST, PATCH) safe to send again
   * (draft-ietf-httpapi-idempotency-key-header). Default `'Idempotency-Key'`.
   */
  idempotencyKeyHeader?: string;
  /** Random numbers in [0, 1) for the jitter; for tests. Default `Math.random`. */
  random?: () => number;
}

export type ResolvedRetry = Required<RetryOptions>;

/** The longest `maxWaitMs`: setTimeout's longest delay, 2^31 − 1 ms. */
const MAX_WAIT_MS = 2_147_483_647;

/**
 * Options with their defaults, checked.
 * @throws {RangeError} `ERR_RATE_LIMIT_CLIENT_OPTION` when a number is negative, not finite, or `maxAttempts` is below 1
 */
export function resolveRetry(options: RetryOptions = {}): ResolvedRetry {
  const r: ResolvedRetry = {
    maxAttempts: options.maxAttempts ?? 4,
    maxWaitMs: options.maxWaitMs ?? 60_000,
    baseDelayMs: options.baseDelayMs ?? 500,
    maxDelayMs: options.maxDelayMs ?? 30_000,
    jitterMs: options.jitterMs ?? 1000,
    statuses: options.statuses ?? [429, 503],
    idempotencyKeyHeader: options.idempotencyKeyHeader ?? 'Idempotency-Key',
    random: options.random ?? Math.random,
  };
  for (const key of ['maxWaitMs', 'baseDelayMs', 'maxDelayMs', 'jitterMs'] as const) {
    if (!Number.isFinite(r[key]) || r[key] < 0) {
      throw clientOptionError(`${key} must be a number >= 0, got ${String(r[key])}`);
    }
  }
  if (r.maxWaitMs > MAX_WAIT_MS) {
    throw clientOptionError(
      `maxWaitMs must be at most ${MAX_WAIT_MS} (24.8 days), got ${r.maxWaitMs}`,
    );
  }
  if (!Number.isInteger(r.maxAttempts) || r.maxAttempts < 1) {
    throw clientOptionError(`maxAttempts must be an integer >= 1, got ${String(r.maxAttempts)}`);
  }
  return r;
}

/** RFC 9110 §9.2.2: methods whose repetition has the effect of one request. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** True when a request may be sent again: an idempotent method, or an idempotency key. */
export function mayRetry(method: string, hasIdempotencyKey: boolean): boolean {
  return IDEMPOTENT.has(method.toUpperCase()) || hasIdempotencyKey;
}

/**
 * The wait before attempt `attempt + 1` (attempt counts from 1), **ms**: `Retry-After` plus
 * up to `jitterMs` when the response has one (it takes precedence, as
 * draft-ietf-httpapi-ratelimit-headers says), else an exponential backoff with full jitter,
 * at least the quota's reset plus up to `jitterMs` when the response reports none left.
 */
export function retryDelayMs(
  attempt: number,
  fields: RateLimitFields,
  options: ResolvedRetry,
): number {
  if (fields.retryAfterMs !== undefined) {
    return fields.retryAfterMs + Math.floor(options.random() * options.jitterMs);
  }
  const ceiling = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** (attempt - 1));
  const backoff = Math.floor(options.random() * ceiling);
  const tightest = fields.tightest;
  // Nothing left until the reset: not before it, and jittered past it like a Retry-After.
  return tightest !== undefined && tightest.remaining === 0
    ? Math.max(
        backoff,
        tightest.resetSeconds * 1000 + Math.floor(options.random() * options.jitterMs),
      )
    : backoff;
}

/**
 * What follows a refused response (a status in `statuses`) on attempt `attempt`, after
 * `waitedMs` of waiting in all: the wait before the next attempt, **ms**.
 * @throws {RateLimitedError} when the client gives up: the request may not be sent again
 *   (`'not-idempotent'`), the attempts are used up (`'attempts'`), or the wait would pass
 *   `maxWaitMs` (`'wait-too-long'`)
 */
export function waitOrGiveUp<R>(
  response: R,
  status: number,
  fields: RateLimitFields,
  attempt: number,
  waitedMs: number,
  retriable: boolean,
  options: ResolvedRetry,
): number {
  if (!retriable) {
    throw new RateLimitedError(response, status, attempt, 'not-idempotent', fields.retryAfterMs);
  }
  if (attempt >= options.maxAttempts) {
    throw new RateLimitedError(response, status, attempt, 'attempts', fields.retryAfterMs);
  }
  const delayMs = retryDelayMs(attempt, fields, options);
  if (waitedMs + delayMs > options.maxWaitMs) {
    throw new RateLimitedError(response, status, attempt, 'wait-too-long', delayMs);
  }
  return delayMs;
}

/** Why the client gave up on a request. */
export type GiveUpReason = 'attempts' | 'wait-too-long' | 'not-idempotent';

/**
 * Thrown (fetch: the promise rejects) when the client stops retrying a refused request; the
 * last response is on it, its body unread.
 */
export class RateLimitedError<R = unknown> extends Error {
  override readonly name = 'RateLimitedError';
  constructor(
    /** The last response (a fetch `Response`, or an Axios response). */
    readonly response: R,
    /** Its HTTP status (429 or 503 by default). */
    readonly status: number,
    /** Attempts made, the first included. */
    readonly attempts: number,
    readonly reason: GiveUpReason,
    /**
     * **ms**: for `'wait-too-long'` the wait the client declined (jitter included); otherwise
     * the response's `Retry-After`, when it had one.
     */
    readonly retryAfterMs?: number,
  ) {
    super(
      reason === 'attempts'
        ? `rate limited: ${status} after ${attempts} attempt(s)`
        : reason === 'not-idempotent'
          ? `rate limited: ${status}; not retried: the method is not idempotent and the request has no idempotency key`
          : `rate limited: ${status}; the server asks to wait ${String(retryAfterMs)} ms, beyond the client's maxWaitMs`,
    );
  }
}
