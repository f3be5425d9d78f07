import type { CircuitBreakerOptions } from './call/circuit-breaker.js';
import type { DenyCacheOptions } from './call/deny-cache.js';
import { resolvePolicy, type Policy, type PolicyInput } from './model/policy.js';
import type { StoreRefund } from './model/refund.js';
import type { RateLimitStore } from './stores/store.js';

// The shapes the RateLimiter (limiter.ts) takes and gives, apart from its code.

/**
 * What a request spent, from `RateLimiter.spend`, to give back with
 * `RateLimiter.refund`: per entry (by its index in the request's entries) that spent
 * under its policy's own state.
 */
export interface Spending {
  readonly refunds: readonly { readonly index: number; readonly refund: StoreRefund }[];
}

/** Options of `RateLimiter`. */
export interface RateLimiterOptions {
  store: RateLimitStore;
  /** First part of every key: `<prefix>:{<identity>}:<scope>:<policy>:…`. Default `'rl'`. */
  prefix?: string;
  /**
   * Longest wait for one store call while the store answers nothing, in **ms** (default 100).
   * Past it the call fails with a {@link RateLimitBackendError} of kind `timeout`; the call
   * is not retried, and its late reply is ignored. A store that answered other calls
   * meanwhile is behind, not down, as is one whose call this process itself held up (its
   * timer ran late: a busy event loop): the call keeps waiting, up to `maxWaitMs`, and such a
   * timeout never opens the circuit breaker. `Infinity` waits forever.
   */
  timeoutMs?: number;
  /**
   * Longest wait, in **ms**, for a store call while the store is behind (see `timeoutMs`):
   * checked every `timeoutMs`, so a call gives up at the first check past it. At least
   * `timeoutMs`; `Infinity` waits as long as the store keeps answering. Default 10 × `timeoutMs`.
   */
  maxWaitMs?: number;
  /**
   * Stops calling a store that keeps failing, for a cool-down, then probes it with one
   * call. Default `{ failureThreshold: 5, cooldownMs: 2000 }`; `false` turns it off.
   */
  circuitBreaker?: CircuitBreakerOptions | false;
  /**
   * Answers a request that was just refused for a long wait from memory, without the store,
   * until its wait is over (see {@link DenyCacheOptions}). Off by default; `true` takes the
   * defaults. Calls with `denyCache: false` (shadow policies) always reach the store.
   */
  denyCache?: DenyCacheOptions | boolean;
}

/**
 * One policy of a request, for `RateLimiter.consumeEach`: policies of one request
 * may limit different identities (the route per IP, the API per user).
 */
export interface LimitEntry {
  /** Who is limited by this policy, e.g. `user:42`. */
  identity: string;
  policy: Policy | PolicyInput;
  /** Units to spend under this policy; default: the policy's `cost`, else the call's. */
  cost?: number;
  /** Scope when the policy names none; default: the call's `scope`. */
  scope?: string;
}

/** Options of one `RateLimiter.consume` call. */
export interface ConsumeOptions {
  /** Units to spend under every policy that sets no `cost` of its own: an integer >= 0. Default 1. */
  cost?: number;
  /** Scope for policies that name none: one scope, one budget per identity. Default `'global'`. */
  scope?: string;
  /** `false` to ask the store even when the deny cache knows the answer (shadow policies). */
  denyCache?: boolean;
}

/** Policies as `consume` takes them: validated {@link Policy} objects or inputs to validate. */
export type Policies = Policy | PolicyInput | readonly (Policy | PolicyInput)[];

/**
 * Validates a policy once, for use on every request (see {@link resolvePolicy}).
 * @throws {RateLimitConfigError}
 */
export function definePolicy(input: PolicyInput, where?: string): Policy {
  return resolvePolicy(input, where);
}
