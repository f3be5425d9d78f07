import { refundSlidingLog } from '../algorithms/sliding-log.js';
import type { Outcome, PolicyAlgorithm, State } from '../algorithms/types.js';
import type { StoreOutcome, StorePolicy, StoreRefund } from '../stores/store.js';

/**
 * Refunds (`count: 'failed' | 'succeeded'`): a request spends when it is decided, and gets
 * its spending back once its outcome shows it should not have counted. The TypeScript
 * reference of the refund script (`stores/redis/lua/refund.ts`); MemoryStore runs it.
 *
 * A refund never gives back more than the request spent, and never takes the state below
 * empty (a full bucket, a zero count):
 * - token bucket and GCRA: the debt shrinks by what is still owed of the request's `cost`
 *   (the refill repays the newest spending last: it is owed until `mark`, the TAT the
 *   request left), down to 0;
 * - fixed window: the count shrinks by `cost`, down to 0, only in the window the request
 *   spent in (`mark`: its end in ms); a later window owes it nothing;
 * - sliding window: the count of the window the request spent in (`mark`: its index)
 *   shrinks, as the current window or, once it is the previous one, as that;
 * - sliding log: up to `cost` of the hits logged at `mark` (the request's time in ms) leave
 *   the log; hits that expired owe nothing.
 */

// StoreRefund lives in stores/store.ts (the store's contract), re-exported here.
export type { StoreRefund } from '../stores/store.js';

/**
 * What a request spent, from `RateLimiter.spend`, to give back with
 * `RateLimiter.refund`: per entry (by its index in the request's entries) that spent
 * under its policy's own state.
 */
export interface Spending {
  readonly refunds: readonly { readonly index: number; readonly refund: StoreRefund }[];
}

/**
 * The mark of a state a request wrote (see {@link StoreRefund.mark}); for token bucket and
 * GCRA, `[tatMs, ticks]`, and for the fixed window `[count, windowEndMs]`, read at `offsetMs`
 * (0 when the time is absolute).
 */
function markOf(algorithm: PolicyAlgorithm, written: State, offsetMs = 0): number {
  // A switch the compiler checks whole: a new algorithm fails to build here until it says
  // what its mark is, instead of falling into another's arithmetic.
  switch (algorithm) {
    case 'fixed-window':
      return offsetMs + written[1]!;
    case 'sliding-window':
      return written[0]!;
    case 'sliding-log':
      // The request's hits are the newest of the log it wrote.
      return written[written.length - 1]!;
    case 'token-bucket':
    case 'gcra':
      return offsetMs + written[0]! + (written[1]! > 0 ? 1 : 0);
    case 'concurrency':
      throw new TypeError('a concurrency slot is released, never refunded');
    default:
      return unknownAlgorithm(algorithm);
  }
}

function unknownAlgorithm(algorithm: never): never {
  throw new TypeError(`no refund rule for algorithm ${String(algorithm)}`);
}

/**
 * The store's outcome of a policy spent under its own state (no exemption, override or
 * block): its numbers, and the mark a refund needs only when the caller may refund it.
 * @param offsetMs when the state was read at time 0 (a token bucket or GCRA debt, a fixed
 *   window, from Redis), the time in ms it counts from; asked only for a mark
 * @param windowEndMs a fixed window's end in ms as the store itself reads it (Redis: its key's
 *   expiry), which is then its mark
 */
export function spentOutcome(
  o: Outcome,
  policy: StorePolicy,
  offsetMs?: () => number,
  windowEndMs?: number,
): StoreOutcome {
  const { allowed, remaining, resetMs, retryAfterMs } = o;
  if (!policy.refundable || !o.state) return { allowed, remaining, resetMs, retryAfterMs };
  const mark = windowEndMs ?? markOf(policy.algorithm, o.state, offsetMs?.());
  return { allowed, remaining, resetMs, retryAfterMs, mark };
}

/** Token bucket and GCRA: the ticks (1/L ms) still owed of the request's spending at `now`. */
export function owedTicks(refund: StoreRefund, now: number): number {
  const { limit: L, periodMs: P, cost, mark } = refund;
  return Math.min(cost * P, Math.max(0, (mark - now) * L));
}

/**
 * The state after a refund, with its expiry in ms since the epoch (undefined: delete the
 * key); `null` when there is nothing to give back (the key stays as it is).
 */
export function refundedState(
  refund: StoreRefund,
  state: State | undefined,
  expiresAt: number,
  now: number,
): { state: State; expiresAt: number } | undefined | null {
  if (state === undefined) return null;
  const { algorithm, limit: L, cost, mark } = refund;
  if (algorithm === 'fixed-window') {
    if (state[1] !== mark || state[0] === 0) return null;
    return { state: [Math.max(0, state[0]! - cost), mark], expiresAt };
  }
  if (algorithm === 'sliding-window') {
    // Two windows on, the one spent in no longer counts, whatever its state still holds.
    if (now >= (mark + 2) * refund.periodMs) return null;
    const [index, cur, prev] = state as [number, number, number];
    if (index === mark && cur > 0) {
      return { state: [index, Math.max(0, cur - cost), prev], expiresAt };
    }
    if (index === mark + 1 && prev > 0) {
      return { state: [index, cur, Math.max(0, prev - cost)], expiresAt };
    }
    return null;
  }
  if (algorithm === 'sliding-log') {
    // The request's hits have expired (newer ones keep the log): they owe nothing.
    if (mark + refund.periodMs <= now) return null;
    const kept = refundSlidingLog(state, mark, cost);
    return kept === undefined ? null : { state: kept, expiresAt };
  }
  if (algorithm !== 'token-bucket' && algorithm !== 'gcra') return unknownAlgorithm(algorithm);
  // Token bucket and GCRA: `[tatMs, ticks]`, the debt in ticks of 1/L ms (see gcra.ts).
  const debt = state[0]! >= now ? (state[0]! - now) * L + Math.min(state[1]!, L - 1) : 0;
  const owed = owedTicks(refund, now);
  if (debt <= 0 || owed === 0) return null;
  const left = Math.max(0, debt - owed);
  if (left === 0) return undefined;
  return {
    state: [now + Math.floor(left / L), left % L],
    expiresAt: now + Math.ceil(left / L),
  };
}
