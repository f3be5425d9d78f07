/**
 * The contract every algorithm implements twice: as a pure TypeScript function (the
 * reference, used by MemoryStore and by tests) and in Lua (used by RedisStore; see
 * {@link LuaForm}). The conformance suite runs both against the same expectations.
 */

/**
 * The five algorithms (see docs/reference/policies-and-algorithms.md).
 * - `fixed-window`: a counter per window; the window starts at the identity's first
 *   admitted request and lasts one period.
 * - `sliding-window`: the weighted sum of the current and the previous epoch-aligned window.
 * - `sliding-log`: a log of the hits of the last period, each expiring exactly one period
 *   after it (`sliding-log.ts`).
 * - `token-bucket`: capacity `burst ?? limit`, refilled at `limit / periodMs` tokens per ms.
 * - `gcra`: the Generic Cell Rate Algorithm (ITU-T I.371): one theoretical arrival time
 *   (TAT) per identity; emission interval T = periodMs / limit, tolerance tau = burst × T.
 *   Decides exactly as `token-bucket` does, with other state.
 */
export type Algorithm = 'fixed-window' | 'sliding-window' | 'sliding-log' | 'token-bucket' | 'gcra';

/**
 * What a validated policy evaluates: one of the five algorithms, or `'concurrency'` for a
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
  /**
   * Last part of the key (`fwc`, `swc`, `tb`, `gcra`): each algorithm keeps its own state, so
   * switching a policy to another algorithm starts afresh instead of misreading a value.
   */
  readonly tag: string;
  readonly evaluate: Evaluate;
  /** How RedisStore keeps the state, and the Lua that decides on it. */
  readonly lua: LuaForm;
}

/**
 * The Lua side of an algorithm: the consume and refund scripts (`stores/redis/lua/`) paste
 * it into the branch that their dispatch table (`stores/redis/lua/protocol.ts`) gives the
 * algorithm's code. Its `kind` says how the state is stored, hence what the scripts do
 * around the algorithm's Lua and how RedisStore reads their reply.
 */
export type LuaForm = ValueForm | DebtForm | CounterForm | LeasesForm;

/**
 * State in the key's value (the sliding window and the sliding log; the sliding window's
 * packed form keeps its window in the key's expiry, see sliding-window.ts). The consume
 * script reads the value and the server clock (`TIME`), runs `decide`, replies the value as
 * it stood and the ms it was read at (which `decode` turns into the state `evaluate` reads; a
 * sliding window alone on the lone path replies its counts as one integer instead, see
 * `stores/redis/lua/lone.ts`), and writes the new value with its TTL once every policy
 * admits. The refund script calls `refund` and rewrites the value with `KEEPTTL`.
 */
interface ValueForm {
  readonly kind: 'value';
  /** Parses the stored string; undefined when it is not this algorithm's format. */
  readonly decode: (raw: string) => State | undefined;
  /**
   * A Lua chunk pasted inline into the consume script's branch of the algorithm: reads the
   * locals `stored` (the value, false when none), `now` and `period_ms` (ms), `limit` and
   * `cost`, and `at` (ms, `now` unless the chunk moves it: the time the state is read at,
   * which the script replies with `stored`, both as the chunk leaves them); sets `denies`
   * when it refuses, and when it admits with cost > 0, the new `value`,
   * its `ttl_ms` and, true when the key already expires at that TTL (the stored window goes
   * on), `keep_ttl`: the script then writes the value with `KEEPTTL`, 40% cheaper in Redis
   * than `PX`; or `increments` with the amount as `value`, which the script adds (`INCRBY`,
   * which keeps the expiry). Decides exactly as `evaluate` does (test/integration/lua-reference); the
   * numbers reported to callers come from `evaluate`. It may use the script's locals `floor`
   * and `fmt` (the lone path, `stores/redis/lua/lone.ts`, defines no others).
   */
  readonly decide: string;
  /**
   * A Lua chunk defining `local function refund(stored, mark, cost)`: the value once `cost`
   * is given back to the request that spent at `mark` (see `model/refund.ts`), or nil when
   * nothing is owed. It may use the refund script's locals `fmt`, `find`, `sub`, `max`.
   */
  readonly refund: string;
}

/**
 * A debt in ticks of 1/limit ms kept in the key's **expiry** (token bucket and GCRA, one
 * body: see `gcra.ts`). The chunks are pasted inline (no function: the debt is the path
 * most requests take, and a closure per call costs them), reading and setting the locals
 * of the consume and refund scripts that `gcra.ts` lists.
 */
interface DebtForm {
  readonly kind: 'debt';
  readonly decide: string;
  readonly refund: string;
}

/**
 * A count in the key's value and the window's end in the key's **expiry** (the fixed window,
 * `fixed-window.ts`). Pasted inline as the debt is, reading and setting the locals of the
 * consume and refund scripts that `fixed-window.ts` lists. The consume script replies the
 * count and the ms left of the window, a state read at time 0.
 */
interface CounterForm {
  readonly kind: 'counter';
  readonly decide: string;
  readonly refund: string;
}

/**
 * A sorted set of leases (concurrency limits, `concurrency.ts`): the consume script's lease
 * branch (`stores/redis/lua/lease.ts`), which takes slots once every policy admits. Never
 * refunded: released.
 */
interface LeasesForm {
  readonly kind: 'leases';
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
