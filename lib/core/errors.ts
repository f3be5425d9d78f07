import type { KnownRefusal } from './model/decision.js';
import { seeErrorsPage } from './errors-page.js';

/**
 * Stable error codes, one per kind of misconfiguration, each a heading of
 * `docs/reference/errors.md` (what it means, the usual cause, the fix). Users search for
 * the code.
 */
export type RateLimitErrorCode =
  | 'ERR_RATE_LIMIT_RATE'
  | 'ERR_RATE_LIMIT_ALGORITHM'
  /** A `sliding-log` policy whose limit is above its log's size (10,000 entries). */
  | 'ERR_RATE_LIMIT_LOG_SIZE'
  | 'ERR_RATE_LIMIT_BURST'
  | 'ERR_RATE_LIMIT_COST'
  | 'ERR_RATE_LIMIT_BLOCK'
  | 'ERR_RATE_LIMIT_CONCURRENCY'
  | 'ERR_RATE_LIMIT_NAME'
  | 'ERR_RATE_LIMIT_SCOPE'
  | 'ERR_RATE_LIMIT_DUPLICATE_POLICY'
  /** A bad option of `RateLimitModule.forRoot`/`forRootAsync` or of `RateLimiter`. */
  | 'ERR_RATE_LIMIT_OPTION'
  /** A bad option of a policy (`@RateLimit`, `byTier`, the module's `default`) beside its rate. */
  | 'ERR_RATE_LIMIT_POLICY_OPTION'
  /** A bad option of a store (`MemoryStore`, `RedisStore`, the throttler drop-in's storage). */
  | 'ERR_RATE_LIMIT_STORE_OPTION'
  /** A feature asked of a store that does not implement it (`refund`, `release`, `inspect`, `control`). */
  | 'ERR_RATE_LIMIT_STORE_UNSUPPORTED'
  /** A bad `graphql` option of the module. */
  | 'ERR_RATE_LIMIT_GRAPHQL_OPTION'
  /** An option that needs an optional peer dependency that is not installed. */
  | 'ERR_RATE_LIMIT_PEER_DEPENDENCY'
  /** A key function or `keys.user` selector that returned no identity (at request time). */
  | 'ERR_RATE_LIMIT_IDENTITY'
  /** A bad argument to an override or exemption (`RateLimitService`, the admin endpoints). */
  | 'ERR_RATE_LIMIT_CONTROL'
  /** A bad option of `RateLimitAdminModule`. */
  | 'ERR_RATE_LIMIT_ADMIN_OPTION'
  /** A bad `overload` option, `@Priority` or `@OverloadPool`. */
  | 'ERR_RATE_LIMIT_OVERLOAD_OPTION';

/**
 * Thrown for a configuration that can never work: a bad rate string, algorithm, burst,
 * cost, policy name or scope, a bad option. Raised when a policy is defined (decorators:
 * when the class is defined; module and limiter options: at bootstrap), never into a
 * request: what a user function returns while serving one (`ERR_RATE_LIMIT_IDENTITY`, a
 * rate or cost function's answer) is logged as `rate_limit.config_error` instead.
 *
 * The message quotes the offending value, names where it came from
 * (e.g. `ReportsController.export`), and ends with the code and the link to its heading:
 * `… (in ReportsController.export) [ERR_RATE_LIMIT_RATE] (see
 * docs/reference/errors.md#err_rate_limit_rate in the nest-rate-limit package)`.
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
    super(`${detail}${where ? ` (in ${where})` : ''} [${code}] ${seeErrorsPage(code)}`);
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

/**
 * `make()`, run with V8's stack trace capture off: for errors that are answers, not bugs (a
 * refusal, a call the open circuit breaker skips), made once per request on paths a client
 * or an outage can drive at full rate. The trace would hold only our own frames, and
 * capturing it cost more than the rest of such a request (tens of µs of CPU). The process's
 * `Error.stackTraceLimit` is restored whatever `make` does.
 */
export function withoutStack<T>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
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
