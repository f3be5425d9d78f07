import { quote, RateLimitConfigError } from '../errors.js';

/**
 * Whether a store is *behind* or *down*, as the calls of one limiter see it: how many answers
 * (replies and error replies) its calls have had. A call past `timeoutMs` whose store answered
 * other calls meanwhile waits in line behind them on the connection; a store that answered
 * nothing for as long is down. Under a flood the replies of a busy process's calls sit in its
 * socket (and, with auto-pipelining, its next batch waits for the last one to be answered)
 * for as long as its event loop is busy: a timeout then is the process's, not the store's.
 *
 * One per limiter, shared by its request calls; see `boundedCall`.
 */
export class StoreProgress {
  /** Answers received so far, late ones included: only ever compared for a change. */
  answers = 0;

  /**
   * @param maxWaitMs the longest a call keeps waiting while its store is behind, in **ms**;
   *   checked every `timeoutMs`, so a call gives up at the first check past it
   */
  constructor(readonly maxWaitMs: number) {}
}

/**
 * How late, in **ms**, a call's timer may fire before the process counts as the one late (a
 * stalled event loop, a long garbage collection) rather than the store: a tenth of the
 * timeout, at least 5 ms (timers are a millisecond or two late on an idle process).
 */
export function lateAfterMs(timeoutMs: number): number {
  return Math.max(5, timeoutMs / 10);
}

/**
 * Checks `maxWaitMs`: a number of **ms** >= `timeoutMs`, or `Infinity`.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION`
 */
export function checkMaxWaitMs(maxWaitMs: unknown, timeoutMs: number, where: string): number {
  if (typeof maxWaitMs !== 'number' || Number.isNaN(maxWaitMs) || !(maxWaitMs >= timeoutMs)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid maxWaitMs ${quote(maxWaitMs)}: expected a number of ms >= timeoutMs (${timeoutMs}), or Infinity`,
      where,
    );
  }
  return maxWaitMs;
}
