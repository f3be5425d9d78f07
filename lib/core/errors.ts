import type { KnownRefusal } from './decision.js';

/**
 * Stable error codes, one per kind of misconfiguration. Users search for the code;
 * the README lists every one of them.
 */
export type RateLimitErrorCode =
  | 'ERR_RATE_LIMIT_RATE'
  | 'ERR_RATE_LIMIT_ALGORITHM'
  | 'ERR_RATE_LIMIT_BURST'
  | 'ERR_RATE_LIMIT_COST'
  | 'ERR_RATE_LIMIT_BLOCK'
  | 'ERR_RATE_LIMIT_CONCURRENCY'
  | 'ERR_RATE_LIMIT_NAME'
  | 'ERR_RATE_LIMIT_SCOPE'
  | 'ERR_RATE_LIMIT_DUPLICATE_POLICY'
  | 'ERR_RATE_LIMIT_OPTION';

/**
 * Thrown for a configuration that can never work: a bad rate string, algorithm, burst,
 * cost, policy name or scope. Raised when a policy is defined (decorators: when the class
 * is defined; module and limiter options: at bootstrap), never while serving a request.
 *
 * The message quotes the offending value and names where it came from
 * (e.g. `ReportsController.export`).
 */
export class RateLimitConfigError extends Error {
  override readonly name = 'RateLimitConfigError';

  constructor(
    /** Stable code, e.g. `ERR_RATE_LIMIT_RATE`. */
    readonly code: RateLimitErrorCode,
    /** What is wrong, without the place and the code. */
    readonly detail: string,
    /** Where the bad value came from, e.g. `ReportsController.export`, if known. */
    readonly where?: string,
  ) {
    super(where ? `${detail} (in ${where}) [${code}]` : `${detail} [${code}]`);
  }
}

/** What went wrong with the store. */
export type BackendErrorKind = 'timeout' | 'unavailable' | 'error';

/**
 * Thrown by {@link RateLimiter} when the store did not answer in time or failed.
 * The request was **not** retried; a late reply from a timed-out call is ignored, so a
 * request can never be counted twice by us. Callers choose fail-open or fail-closed.
 */
export class RateLimitBackendError extends Error {
  override readonly name = 'RateLimitBackendError';
  /**
   * Set by `RateLimiter` when the request is refused all the same: this process saw the store
   * refuse some of its policies (same identity, scope and name), and that refusal's wait is
   * not over, or the policy's rate has not given back enough since. Refuse with it rather
   * than failing open: a client over its limit stays held to it while the store cannot be
   * asked.
   */
  refusal?: KnownRefusal;

  constructor(
    readonly kind: BackendErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** JSON-ish rendering of a value for error messages: strings quoted, others as written. */
export function quote(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) {
    return String(value);
  }
  try {
    const numbers = (_key: string, v: unknown) =>
      typeof v === 'number' && !Number.isFinite(v) ? String(v) : v;
    return JSON.stringify(value, numbers) ?? String(value);
  } catch {
    return String(value);
  }
}
