import type { PolicyDecision } from '../core/model/decision.js';

/** A policy's verdict with its window, as the headers need it. Durations in ms. */
export interface HeaderPolicy extends PolicyDecision {
  /** The policy's period in **ms**; sent as `w` in whole seconds. */
  readonly periodMs: number;
  /**
   * The draft's quota unit, when not requests per window: `concurrent-requests` for a
   * concurrency limit (sent as `qu`, without `w`: it has no window).
   */
  readonly quotaUnit?: 'concurrent-requests';
  /**
   * For a token bucket or GCRA without an override: its capacity (`burst ?? limit`), which
   * draft 11's effective window needs. Unset for the windows, whose state does not refill
   * continuously.
   */
  readonly capacity?: number;
}

/** ms to whole seconds, rounded up: what every header carries. */
export function toSeconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/** The remaining a policy shows: a denied policy has nothing left until its wait ends. */
export function shownRemaining(p: HeaderPolicy): number {
  return p.allowed || p.retryAfterMs === Infinity ? p.remaining : 0;
}

/**
 * The seconds until a policy's state is full again (admitted), or its wait (denied), at
 * least 1 for a wait.
 */
export function shownResetS(p: HeaderPolicy): number {
  return p.allowed || p.retryAfterMs === Infinity
    ? toSeconds(p.resetMs)
    : Math.max(1, toSeconds(p.retryAfterMs));
}

/**
 * The most restrictive policy (lowest remaining; ties: longest reset), the one the headers
 * of a single quota describe ("the service limit closest to reaching its limit",
 * draft-ietf-httpapi-ratelimit-headers-07 §3.2). They speak of requests per window: an
 * admitting concurrency limit is left out beside rates (its reset would be its lease, not
 * when a slot frees).
 */
export function expiringPolicy(policies: readonly HeaderPolicy[]): HeaderPolicy | undefined {
  let best: HeaderPolicy | undefined;
  let bestRemaining = 0;
  let bestReset = 0;
  let rates = false;
  for (const p of policies) if (p.quotaUnit === undefined) rates = true;
  for (const p of policies) {
    if (rates && p.quotaUnit !== undefined && p.allowed) continue;
    const remaining = shownRemaining(p);
    const reset = shownResetS(p);
    if (!best || remaining < bestRemaining || (remaining === bestRemaining && reset > bestReset)) {
      best = p;
      bestRemaining = remaining;
      bestReset = reset;
    }
  }
  return best;
}

/** The names of three separate fields for one quota: limit, remaining, reset. */
export type QuotaFieldNames = readonly [limit: string, remaining: string, reset: string];

/** The expiring policy's limit, remaining and reset (seconds) as three separate fields. */
export function writeQuotaFields(
  out: Record<string, string>,
  names: QuotaFieldNames,
  p: HeaderPolicy,
): void {
  out[names[0]] = String(p.limit);
  out[names[1]] = String(shownRemaining(p));
  out[names[2]] = String(shownResetS(p));
}
