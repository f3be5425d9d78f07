import type { CircuitBreaker } from './circuit-breaker.js';
import { deadlineIn, finished, type Deadline } from './deadlines.js';
import { quote, RateLimitBackendError, RateLimitConfigError, withoutStack } from '../errors.js';
import { lateAfterMs, type StoreProgress } from './store-progress.js';
import type { RateLimitStore } from '../stores/store.js';

/**
 * Bounds a store call by `timeoutMs`, passes it through the circuit breaker (when one is
 * given), and turns its failures into {@link RateLimitBackendError}: `timeout` past
 * `timeoutMs` (the late reply is ignored, never retried), `unavailable` while the breaker
 * is open or when the store cannot be reached, `error` when it answered with an error.
 *
 * With `progress`, a call past `timeoutMs` is given up only when the store is down, not when
 * it is behind: while the store answers other calls, or when this process was the one late
 * (its timer fired late: a busy event loop), the call keeps waiting, another `timeoutMs` at a
 * time, up to `progress.maxWaitMs`. Such a timeout never counts against the circuit breaker:
 * only a store that answered nothing during the whole wait opens it. Replies that say the store
 * cannot write (Redis out of memory, a read-only replica) fail the call but are answers: they
 * do not open the breaker either, since the store still refuses what it should refuse.
 *
 * With `store`, it is asked first whether it can take the call now (`RateLimitStore.ready`):
 * when it is still connecting, the call is made, and its deadline starts, once it can; when
 * it cannot, the call is never made.
 *
 * @param timeoutMs longest wait in **ms** without progress; `Infinity` waits forever
 */
export function boundedCall<T>(
  call: () => Promise<T>,
  timeoutMs: number,
  breaker: CircuitBreaker | undefined,
  progress?: StoreProgress,
  store?: Pick<RateLimitStore, 'ready'>,
): Promise<T> {
  if (breaker && !breaker.tryAcquire()) return Promise.reject(breakerOpen());
  const ready = store?.ready?.();
  if (ready === undefined) return waitFor(call, timeoutMs, breaker, progress);
  return ready.then(
    () => waitFor(call, timeoutMs, breaker, progress),
    (error: unknown) => {
      breaker?.failed();
      // One error per call, even when many waited on one connection: a caller may add to it.
      const failure = toBackendError(error);
      throw new RateLimitBackendError(failure.kind, failure.message, { cause: error });
    },
  );
}

/**
 * The error of a call the open circuit breaker skips: one per call (a caller may add to it),
 * made without a stack trace. While the store is down every request takes this path, and
 * the trace (our own frames, never the cause) cost more than the rest of the request: 8 to
 * 21 µs of CPU per HTTP request in a profile of a run whose breaker had opened.
 */
function breakerOpen(): RateLimitBackendError {
  return withoutStack(
    () =>
      new RateLimitBackendError('unavailable', 'rate-limit store skipped: circuit breaker open'),
  );
}

function waitFor<T>(
  call: () => Promise<T>,
  timeoutMs: number,
  breaker: CircuitBreaker | undefined,
  progress: StoreProgress | undefined,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    // Only the first outcome counts: a reply that arrives after the call was given up is
    // ignored (the request was answered without it, never to be counted twice), though it
    // shows the store is answering.
    let settled = false;
    let deadline: Deadline | undefined;
    // What the store had answered at the last look, and whether it answered anything since
    // the call started.
    let seen = progress === undefined ? 0 : progress.answers;
    let progressed = false;
    let started = 0;
    if (timeoutMs !== Infinity) {
      const expire = (lateMs: number): void => {
        // After an event-loop stall, timers run before the replies already sitting in the
        // socket are read. setImmediate waits out that I/O phase, so a reply that did arrive
        // in time still wins, and a stall alone never fails a call.
        setImmediate(() => {
          if (settled) return;
          const waitedMs = performance.now() - started;
          if (progress !== undefined) {
            const moved = progress.answers !== seen;
            seen = progress.answers;
            if (moved) progressed = true;
            // Behind others on the connection, or held up by this process (its commands may
            // have been written only now, behind a batch still being answered, and their
            // replies not read yet): the store gets another timeoutMs of its own.
            if ((moved || lateMs >= lateAfterMs(timeoutMs)) && waitedMs < progress.maxWaitMs) {
              deadline = deadlineIn(timeoutMs, expire);
              return;
            }
          }
          settled = true;
          // Only a store that answered nothing in all this time is down.
          if (!progressed) breaker?.failed();
          reject(
            new RateLimitBackendError(
              'timeout',
              progressed
                ? `rate-limit store behind: no answer to this call within ${Math.round(waitedMs)} ms (maxWaitMs ${progress!.maxWaitMs}), though it answered others`
                : waitedMs < timeoutMs * 1.5
                  ? `rate-limit store did not answer within ${timeoutMs} ms`
                  : `rate-limit store did not answer within ${timeoutMs} ms (waited ${Math.round(waitedMs)} ms: this process was busy)`,
            ),
          );
        });
      };
      deadline = deadlineIn(timeoutMs, expire);
      started = deadline.at - timeoutMs;
    }
    // A store that throws instead of rejecting is a failed call like any other.
    let pending: Promise<T>;
    try {
      pending = Promise.resolve(call());
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => {
        // Late replies count too: they show the store is answering.
        if (progress !== undefined) progress.answers++;
        if (settled) return;
        settled = true;
        if (deadline) finished(deadline);
        breaker?.succeeded();
        resolve(value);
      },
      (error: unknown) => {
        const answered = isReply(error);
        if (answered && progress !== undefined) progress.answers++;
        if (settled) return;
        settled = true;
        if (deadline) finished(deadline);
        if (answered && cannotWrite(error)) breaker?.succeeded();
        else breaker?.failed();
        reject(toBackendError(error));
      },
    );
  });
}

/** What ioredis answers for a command sent while it is not connected. */
const OFFLINE = /Stream isn't writeable|Connection is closed/;

/** Whether the store itself answered with this error (a Redis error reply). */
function isReply(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError';
}

/**
 * Redis answered, but refuses writes: out of memory under `maxmemory-policy noeviction`
 * (`OOM`), a read-only replica (`READONLY`), a failed snapshot under
 * `stop-writes-on-bgsave-error` (`MISCONF`), too few replicas for `min-replicas-to-write`
 * (`NOREPLICAS`). The script still ran up to its first write, so what it refuses it still
 * refuses; only what it would admit fails.
 */
const CANNOT_WRITE: Readonly<Record<string, string>> = {
  OOM: 'Redis is out of memory',
  READONLY: 'connected to a read-only replica',
  MISCONF: 'Redis cannot persist to disk (stop-writes-on-bgsave-error)',
  NOREPLICAS: 'too few replicas for min-replicas-to-write',
};

function cannotWriteReason(message: string): string | undefined {
  const space = message.indexOf(' ');
  const code = space < 0 ? message : message.slice(0, space);
  return Object.hasOwn(CANNOT_WRITE, code) ? CANNOT_WRITE[code] : undefined;
}

function cannotWrite(error: unknown): boolean {
  return cannotWriteReason((error as Error).message) !== undefined;
}

function toBackendError(error: unknown): RateLimitBackendError {
  if (error instanceof RateLimitBackendError) return error;
  const message = error instanceof Error ? error.message : String(error);
  // A reply from Redis means it is up and refused this call; anything else means we could not reach it.
  if (isReply(error)) {
    const reason = cannotWriteReason(message);
    const text = reason
      ? `rate-limit store cannot write: ${reason} (${message})`
      : `rate-limit store failed: ${message}`;
    return new RateLimitBackendError('error', text, { cause: error });
  }
  // ioredis's words for "not connected" read as advice to turn its offline queue on, which
  // the module turns off on purpose (a request must never wait for a reconnection).
  const text = OFFLINE.test(message)
    ? `rate-limit store unreachable: not connected to Redis (${message})`
    : `rate-limit store failed: ${message}`;
  return new RateLimitBackendError('unavailable', text, { cause: error });
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
