import type { CircuitBreaker } from './circuit-breaker.js';
import { deadlineIn, finished } from './deadlines.js';
import { quote, RateLimitBackendError, RateLimitConfigError } from './errors.js';

/**
 * Bounds a store call by `timeoutMs`, passes it through the circuit breaker (when one is
 * given), and turns its failures into {@link RateLimitBackendError}: `timeout` past
 * `timeoutMs` (the late reply is ignored, never retried), `unavailable` while the breaker
 * is open or when the store cannot be reached, `error` when it answered with an error.
 *
 * @param timeoutMs longest wait in **ms**; `Infinity` waits forever
 */
export function boundedCall<T>(
  call: () => Promise<T>,
  timeoutMs: number,
  breaker: CircuitBreaker | undefined,
): Promise<T> {
  if (breaker && !breaker.tryAcquire()) {
    return Promise.reject(
      new RateLimitBackendError('unavailable', 'rate-limit store skipped: circuit breaker open'),
    );
  }
  return new Promise<T>((resolve, reject) => {
    // Only the first outcome counts: a reply that arrives after the timeout is ignored,
    // so a slow store keeps failing (and opens the circuit) instead of looking healthy.
    let settled = false;
    const deadline =
      timeoutMs === Infinity
        ? undefined
        : deadlineIn(timeoutMs, () => {
            const error = new RateLimitBackendError(
              'timeout',
              `rate-limit store did not answer within ${timeoutMs} ms`,
            );
            // After an event-loop stall, timers run before the replies already sitting in
            // the socket are read. setImmediate waits out that I/O phase, so a reply that
            // did arrive in time still wins, and a stall alone never fails a call.
            setImmediate(() => {
              if (settled) return;
              settled = true;
              breaker?.failed();
              reject(error);
            });
          });
    // A store that throws instead of rejecting is a failed call like any other.
    let pending: Promise<T>;
    try {
      pending = Promise.resolve(call());
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => {
        if (settled) return;
        settled = true;
        if (deadline) finished(deadline);
        breaker?.succeeded();
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        if (deadline) finished(deadline);
        breaker?.failed();
        reject(toBackendError(error));
      },
    );
  });
}

/** What ioredis answers for a command sent while it is not connected. */
const OFFLINE = /Stream isn't writeable|Connection is closed/;

function toBackendError(error: unknown): RateLimitBackendError {
  if (error instanceof RateLimitBackendError) return error;
  const message = error instanceof Error ? error.message : String(error);
  // A reply from Redis means it is up and refused this call; anything else means we could not reach it.
  const kind = error instanceof Error && error.name === 'ReplyError' ? 'error' : 'unavailable';
  // ioredis's words for "not connected" read as advice to turn its offline queue on, which
  // the module turns off on purpose (a request must never wait for a reconnection).
  const text = OFFLINE.test(message)
    ? `rate-limit store unreachable: not connected to Redis (${message})`
    : `rate-limit store failed: ${message}`;
  return new RateLimitBackendError(kind, text, { cause: error });
}

/** Timers turn a delay above 2^31-1 ms into 1 ms, so only Infinity may go beyond it. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Checks a store-call timeout: a number of **ms** > 0 and <= 2^31-1, or `Infinity`.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION`
 */
export function checkTimeoutMs(timeoutMs: unknown, where: string): asserts timeoutMs is number {
  if (
    typeof timeoutMs !== 'number' ||
    !(timeoutMs > 0) ||
    (timeoutMs > MAX_TIMER_MS && timeoutMs !== Infinity)
  ) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid timeoutMs ${quote(timeoutMs)}: expected a number of ms > 0 and <= 2^31-1, or Infinity`,
      where,
    );
  }
}
