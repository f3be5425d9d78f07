import type { CircuitBreaker } from '../call/circuit-breaker.js';
import type { Lease } from '../algorithms/concurrency.js';
import { RateLimitConfigError } from '../errors.js';
import type { Spending } from '../model/refund.js';
import type { StoreOutcome, StorePolicy } from '../stores/store.js';
import type { RateLimitStore } from '../stores/store.js';
import { boundedCall } from '../call/store-call.js';
import type { StoreProgress } from '../call/store-progress.js';

// What a request gives back once it ends (see RateLimiter.spend, refund and release): the
// store calls behind them, apart from the limiter's decisions.

/**
 * A request's store call settings: `timeoutMs` in **ms**, the circuit breaker if any, and
 * what tells a store behind from a store down (see `boundedCall`).
 */
export interface CallBounds {
  readonly timeoutMs: number;
  readonly breaker: CircuitBreaker | undefined;
  readonly progress?: StoreProgress;
}

/** What the refundable policies of one request spent (see `RateLimiter.spend`). */
export function spendingOf(
  policies: readonly StorePolicy[],
  outcomes: readonly StoreOutcome[],
): Spending | undefined {
  const refunds: Spending['refunds'][number][] = [];
  outcomes.forEach((o, index) => {
    const { key, algorithm, limit, periodMs, cost } = policies[index]!;
    if (o.mark !== undefined && cost > 0 && algorithm !== 'concurrency') {
      refunds.push({ index, refund: { key, algorithm, limit, periodMs, cost, mark: o.mark } });
    }
  });
  return refunds.length > 0 ? { refunds } : undefined;
}

/**
 * See `RateLimiter.refund`.
 * @throws {RateLimitConfigError} for a store without `refund`, as a rejection
 */
export function refundCall(
  store: RateLimitStore,
  bounds: CallBounds,
  spending: Spending,
  indexes: readonly number[] | undefined,
): Promise<number> {
  if (typeof store.refund !== 'function') {
    return Promise.reject(
      new RateLimitConfigError(
        'ERR_RATE_LIMIT_STORE_UNSUPPORTED',
        'this rate-limit store cannot refund: implement RateLimitStore.refund',
        'RateLimiter.refund',
      ),
    );
  }
  const refunds = spending.refunds
    .filter((r) => indexes === undefined || indexes.includes(r.index))
    .map((r) => r.refund);
  if (refunds.length === 0) return Promise.resolve(0);
  return boundedCall(
    () => store.refund!(refunds),
    bounds.timeoutMs,
    bounds.breaker,
    bounds.progress,
  );
}

/**
 * See `RateLimiter.release`: never through the circuit breaker. A release is what
 * lets the next request in, and a breaker opened by other calls says nothing of whether this
 * one would land: it goes to the store, bounded by `timeoutMs`, and a failure is kept for a
 * retry by the caller. Nor does its failure count toward opening the breaker.
 * @throws {RateLimitConfigError} for a store without `release`, as a rejection
 */
export function releaseCall(
  store: RateLimitStore,
  bounds: CallBounds,
  leases: readonly Lease[],
): Promise<number> {
  if (typeof store.release !== 'function') {
    return Promise.reject(
      new RateLimitConfigError(
        'ERR_RATE_LIMIT_STORE_UNSUPPORTED',
        'this rate-limit store cannot release concurrency slots: implement RateLimitStore.release',
        'RateLimiter.release',
      ),
    );
  }
  if (leases.length === 0) return Promise.resolve(0);
  return boundedCall(() => store.release!(leases), bounds.timeoutMs, undefined, bounds.progress);
}

/**
 * Gives back, without waiting, every slot these policies may have taken: for a request
 * nobody is left to release (its call timed out and may still run late; another identity
 * refused it after its own commit on Cluster). A failure changes nothing: the lease expires.
 */
export function abandonLeases(store: RateLimitStore, policies: readonly StorePolicy[]): void {
  const leases: Lease[] = [];
  for (const p of policies) {
    if (p.lease !== undefined && p.cost > 0) leases.push({ key: p.key, id: p.lease });
  }
  if (leases.length === 0 || typeof store.release !== 'function') return;
  try {
    store.release(leases).catch(() => undefined);
  } catch {
    // A store that throws instead of rejecting: the same.
  }
}
