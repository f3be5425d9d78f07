import type { Lease } from '../stores/store.js';

/** Why a request was denied. */
export type DenyReason = 'limit_exceeded' | 'cost_exceeds_limit';

/** The verdict of one policy on one request. All durations in **milliseconds**, integers >= 0. */
export interface PolicyDecision {
  readonly name: string;
  /** Whether this policy alone would admit the request. */
  readonly allowed: boolean;
  /** The policy's limit (units per period). */
  readonly limit: number;
  /** Units left after this request (before it, when the request was denied). */
  readonly remaining: number;
  /** Time until the policy's state is back to full (0 when nothing is spent). */
  readonly resetMs: number;
  /**
   * When denied: the shortest wait after which the same request is admitted, absent other
   * traffic (tight: one millisecond less is not enough). `Infinity` when the cost exceeds
   * the policy's capacity. 0 when this policy admits.
   */
  readonly retryAfterMs: number;
  /** The identity is exempt (an operator's exemption): admitted, nothing spent. */
  readonly exempt?: true;
  /**
   * An operator's override was in force: `limit` above is its limit, and this its period
   * in ms.
   */
  readonly override?: { readonly periodMs: number };
  /**
   * Refused under a penalty (the policy's `block`): a block was in force, or this refusal
   * started one; `retryAfterMs` is then the block's end.
   */
  readonly blocked?: true;
}

/** The verdict on one request: admitted only if every policy admits (all-or-nothing). */
export interface Decision {
  readonly allowed: boolean;
  /** Answered by the deny cache, without the store (waits counted down since). */
  readonly cached?: true;
  /** Set when denied. `cost_exceeds_limit` wins when any policy can never admit the cost. */
  readonly reason?: DenyReason;
  /** One entry per policy, in the order given. */
  readonly policies: readonly PolicyDecision[];
  /**
   * Admitted under concurrency limits: the slots taken, to give back with
   * `RateLimiter.release` once the request ends (else they expire after their lease).
   */
  readonly leases?: readonly Lease[];
}

/**
 * A refusal this process knows without its store (see `RateLimitBackendError.refusal`): the
 * store refused these policies of the same identity, scope and name, and their wait is not
 * over, or their rate has not given back the cost since. Only those policies are in it:
 * `decision.policies[k]` is the request's policy at `indexes[k]`, its waits counted from now.
 */
export interface KnownRefusal {
  readonly decision: Decision;
  readonly indexes: readonly number[];
}
