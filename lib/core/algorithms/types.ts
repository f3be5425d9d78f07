/**
 * The contract every algorithm implements twice: as a pure TypeScript function (the
 * reference, used by MemoryStore and by tests) and as a Lua function of the same shape
 * (used by RedisStore). The conformance suite runs both against the same expectations.
 */

/**
 * The four algorithms (see docs/reference/policies-and-algorithms.md).
 * - `fixed-window`: a counter per window; the window starts at the identity's first
 *   admitted request and lasts one period.
 * - `sliding-window`: the weighted sum of the current and the previous epoch-aligned window.
 * - `token-bucket`: capacity `burst ?? limit`, refilled at `limit / periodMs` tokens per ms.
 * - `gcra`: the Generic Cell Rate Algorithm (ITU-T I.371): one theoretical arrival time
 *   (TAT) per identity; emission interval T = periodMs / limit, tolerance tau = burst × T.
 *   Decides exactly as `token-bucket` does, with other state.
 */
export type Algorithm = 'fixed-window' | 'sliding-window' | 'token-bucket' | 'gcra';

/**
 * What a validated policy evaluates: one of the four algorithms, or `'concurrency'` for a
 * concurrency limit (see `concurrency.ts`), which users declare with `concurrent`.
 */
export type PolicyAlgorithm = Algorithm | 'concurrency';

/** What one evaluation needs. All integers; `periodMs` in milliseconds. */
export interface AlgorithmParams {
  readonly limit: number;
  readonly periodMs: number;
  /** `burst ?? limit` for token-bucket and gcra, `limit` for the window algorithms. */
  readonly capacity: number;
  /** Units this request spends: an integer >= 0. */
  readonly cost: number;
}

/** Stored state: a short tuple of integers (its meaning is the algorithm's own). */
export type State = readonly number[];

/** The result of one evaluation. Durations in milliseconds. */
export interface Outcome {
  readonly allowed: boolean;
  readonly remaining: number;
  readonly resetMs: number;
  /** 0 when allowed; `Infinity` when the cost exceeds the capacity. */
  readonly retryAfterMs: number;
  /** The state to store, present only when the request was admitted with cost > 0. */
  readonly state?: State;
  /** How long the new state matters, in ms (>= 1): its key's TTL. */
  readonly ttlMs?: number;
}

/**
 * A pure algorithm: previous state (undefined when none), the current time in ms, the
 * policy and cost -> the decision and the new state. Must never mutate `state`.
 */
export type Evaluate = (state: State | undefined, now: number, params: AlgorithmParams) => Outcome;

/** One algorithm, in both languages, with its storage format. */
export interface AlgorithmImpl {
  /** Position in the Lua dispatch table (1-based). */
  readonly code: number;
  /**
   * Last part of the key (`fw`, `sw`, `tb`, `gcra`): each algorithm keeps its own state, so
   * switching a policy to another algorithm starts afresh instead of misreading a value.
   */
  readonly tag: string;
  readonly evaluate: Evaluate;
  /**
   * Window algorithms only: decodes the Redis string value; undefined when it is not this
   * algorithm's format.
   */
  readonly decode?: (raw: string) => State | undefined;
  /**
   * Window algorithms only: a Lua function `function(v, now, L, P, cost)` of the stored value
   * returning whether it admits and, when it does with cost > 0, the new value and its TTL
   * in ms. It decides exactly as `evaluate` does (tested); the numbers reported to callers
   * come from `evaluate`. Token bucket and GCRA have none: they share the expiry-based Lua
   * of `stores/redis/lua/consume.ts`, since both are the same debt.
   */
  readonly lua?: string;
}

export function denied(remaining: number, resetMs: number, retryAfterMs: number): Outcome {
  return { allowed: false, remaining, resetMs, retryAfterMs };
}

export function admitted(
  remaining: number,
  resetMs: number,
  state?: State,
  ttlMs?: number,
): Outcome {
  return state
    ? { allowed: true, remaining, resetMs, retryAfterMs: 0, state, ttlMs }
    : { allowed: true, remaining, resetMs, retryAfterMs: 0 };
}

/** Parses `"a:b[:c]"` into exactly `arity` integers, or undefined. */
export function decodeInts(raw: string, arity: number): State | undefined {
  const parts = raw.split(':');
  if (parts.length !== arity) return undefined;
  const values = parts.map(Number);
  return values.every(Number.isSafeInteger) ? values : undefined;
}
