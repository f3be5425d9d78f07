import type { Algorithm } from '../policy.js';

/**
 * One policy of a request, as a store evaluates it. Every `key` of one call shares the
 * same Cluster hash tag (`{identity}`), so the call can run atomically on one node.
 */
export interface StorePolicy {
  /** The Redis key holding this policy's state. */
  readonly key: string;
  readonly algorithm: Algorithm;
  /** Units admitted per period: an integer >= 1. */
  readonly limit: number;
  /** Period in **milliseconds**: an integer >= 1. */
  readonly periodMs: number;
  /** Largest cost ever admitted at once (`burst ?? limit`, or `limit` for the windows). */
  readonly capacity: number;
  /** Units to spend: an integer >= 0; 0 reads without writing. */
  readonly cost: number;
}

/** One policy's verdict. Durations in **milliseconds**, integers >= 0. */
export interface StoreOutcome {
  readonly allowed: boolean;
  readonly remaining: number;
  readonly resetMs: number;
  /** 0 when allowed; `Infinity` when the cost exceeds the capacity. */
  readonly retryAfterMs: number;
  /** The identity is exempt (an operator said so): admitted, nothing spent. */
  readonly exempt?: true;
  /** An operator's override replaced the policy's rate: the limit and period in force. */
  readonly override?: { readonly limit: number; readonly periodMs: number };
}

/**
 * Where rate-limit state lives. Implement it to bring another backend (e.g. another
 * Redis client); the semantics are DESIGN §4, and `test/conformance` checks them.
 */
export interface RateLimitStore {
  /**
   * Evaluates all policies of one request **atomically and all-or-nothing**: the request is
   * admitted only if every policy admits; if any denies, no state changes at all. A policy
   * with cost 0 never writes. Every written key carries a TTL of at least 1 ms.
   *
   * @returns one outcome per policy, in order; when denied, admitting policies report
   *   their state as it stands
   * @throws whatever the backend throws; never retried by the caller
   */
  consume(policies: readonly StorePolicy[]): Promise<StoreOutcome[]>;
  /**
   * Deletes every key that starts with `keyPrefix`. The prefix always contains the
   * identity's hash tag, so on Cluster all matching keys live in one slot.
   * @returns how many keys were deleted
   */
  deleteByPrefix(keyPrefix: string): Promise<number>;
  /** Releases what the store itself created (timers, its own connections). */
  close?(): Promise<void>;
}
