import type { Algorithm, PolicyAlgorithm } from '../algorithms/types.js';

// The store's contract: what a RateLimiter hands a store and gets back. It imports only the
// algorithm names (a leaf module), so any module of the core can import it without a cycle.

/**
 * One policy of a request, as a store evaluates it. Every `key` of one call shares the
 * same Cluster hash tag (`{identity}`), so the call can run atomically on one node.
 */
export interface StorePolicy {
  /** The Redis key holding this policy's state. */
  readonly key: string;
  /** For `'concurrency'`: `limit` slots, leases of `periodMs`, and `lease` set. */
  readonly algorithm: PolicyAlgorithm;
  /** Units admitted per period: an integer >= 1. */
  readonly limit: number;
  /** Period in **milliseconds**: an integer >= 1. */
  readonly periodMs: number;
  /** Largest cost ever admitted at once (`burst ?? limit`, or `limit` for the windows). */
  readonly capacity: number;
  /** Units to spend: an integer >= 0; 0 reads without writing. */
  readonly cost: number;
  /** A penalty: **ms** the policy refuses the identity after refusing it once (see `penalty.ts`). */
  readonly blockMs?: number;
  /** With `blockMs`: a refusal during the block starts it again. */
  readonly extendBlock?: true;
  /** With `blockMs`: a block's start deletes `key`, so the first request after it starts afresh. */
  readonly blockResets?: true;
  /** The caller may refund this spending (`RateLimiter.spend`): report its `mark`. */
  readonly refundable?: true;
  /**
   * A concurrency limit's lease id (see `concurrency.ts`): the slot this request takes, under
   * `key`, when every policy admits it and its cost is 1 (0 peeks).
   */
  readonly lease?: string;
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
  /** Refused under a penalty: a block was in force, or this refusal started one. */
  readonly blocked?: true;
  /**
   * Admitted and spent under the policy's own state (no exemption, no override): where, for
   * a later {@link RateLimitStore.refund} (see `StoreRefund.mark`).
   */
  readonly mark?: number;
}

/** One policy's refund, as a store applies it (see `refund.ts`). */
export interface StoreRefund {
  /** The policy's state key (as consumed; all keys of one call share a hash tag). */
  readonly key: string;
  readonly algorithm: Algorithm;
  readonly limit: number;
  /** **ms**. */
  readonly periodMs: number;
  /** Units spent, to give back: an integer >= 1. */
  readonly cost: number;
  /**
   * Where the request spent: the window's end (fixed window, ms), its index (sliding), the
   * time its hits were logged at (sliding log, ms), or
   * the TAT it left, in ms (token bucket, GCRA), on the store's clock. RedisStore, on the
   * server clock, gives the fixed window's end on Redis' clock (its key's expiry, which tells
   * its windows apart) and counts the TAT on this process's clock, which only the elapsed
   * time matters to.
   */
  readonly mark: number;
}

/**
 * One slot taken by an admitted request (see `concurrency.ts`), to give back with
 * `RateLimiter.release`.
 */
export interface Lease {
  /** The sorted set (Redis) or set (memory) of the policy's leases. */
  readonly key: string;
  /** The lease id: random, unique per request and policy. */
  readonly id: string;
  /**
   * How long, in **ms**, the store keeps it when it is never given back (the policy's
   * `leaseMs`): a release kept for a retry while the store is down is dropped after that.
   * Stores ignore it.
   */
  readonly leaseMs?: number;
}

/**
 * Where rate-limit state lives. Implement it to bring another backend (e.g. another
 * Redis client); docs/reference/policies-and-algorithms.md gives the semantics, and
 * `test/conformance` checks them.
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
   * Deletes every key that starts with `keyPrefix`, except control keys (overrides and
   * exemptions, `…}:ctl`: see `controlKey`). The prefix always contains the identity's hash
   * tag, so on Cluster all matching keys live in one slot.
   * @returns how many keys were deleted
   */
  deleteByPrefix(keyPrefix: string): Promise<number>;
  /**
   * Reads every key that starts with `keyPrefix` (all in one slot, as for
   * {@link RateLimitStore.deleteByPrefix}) at one instant. Optional for third-party stores:
   * `RateLimitService.inspect` throws a clear error without it.
   */
  inspect?(keyPrefix: string): Promise<StoreSnapshot>;
  /**
   * Reads or changes one control hash (see `controlKey`) at one instant, on the store's clock.
   * Optional for third-party stores: the override and exemption methods of
   * `RateLimitService` throw a clear error without it.
   */
  control?(key: string, change: ControlChange): Promise<ControlSnapshot>;
  /**
   * Gives back what one request spent (see `refund.ts`), atomically per identity: never more
   * than it spent, never below empty. Optional for third-party stores: `count` policies
   * need it.
   * @returns how many policies got something back
   */
  refund?(refunds: readonly StoreRefund[]): Promise<number>;
  /**
   * Gives back the slots of concurrency limits (see `concurrency.ts`), one atomic call per
   * identity; a lease already given back, or expired, is skipped. Optional for third-party
   * stores: concurrency policies need it.
   * @returns how many slots were freed
   */
  release?(leases: readonly Lease[]): Promise<number>;
  /**
   * Told by each `RateLimiter` on the store, once, the key prefix it uses and what to call
   * with the identity key prefixes (`<prefix>:{<tag>}:`) whose overrides or exemptions
   * changed elsewhere (its deny cache forgets their denials). Optional: for a store that
   * keeps a local view of controls, as RedisStore's index of controlled identities.
   */
  watchControls?(prefix: string, changed?: (identityPrefixes: readonly string[]) => void): void;
  /**
   * Whether a call can be sent now: `undefined` when it can (called on every request: keep
   * it cheap); else a promise that resolves once it can (a client still making its first
   * connection) or rejects when it cannot (not connected): the call is then never sent, so
   * nothing queued while disconnected is sent later, counted behind the caller's back.
   * The caller's timeout starts once it resolves. Optional: without it, calls go at once.
   */
  ready?(): Promise<void> | undefined;
  /** Releases what the store itself created (timers, its own connections). */
  close?(): Promise<void>;
}

/**
 * One stored key as {@link RateLimitStore.inspect} read it.
 */
export interface StoredKey {
  /** The key, as the limiter named it. */
  readonly key: string;
  /** **ms** before the key expires; -1 when it has no expiry. */
  readonly ttlMs: number;
  /**
   * The state, by the key's algorithm tag (its last part), undefined when unreadable:
   * - `tb`, `gcra`: `[ms, ticks]`, the debt `ms·L + ticks` in ticks of 1/L ms (L = the
   *   policy's limit; `|ticks| < L`, negative when the stored expiry was rounded up);
   * - `fwc`: `[count, windowEndMs]`; `swc`: `[windowIndex, current, previous]`, or
   *   `[current, previous]` where the key's expiry holds the window (RedisStore on the server
   *   clock: the current window ends one period before the key expires);
   * - `cc` (a concurrency limit): the expiries of its live leases, in ms since the epoch on
   *   the store's clock, ascending.
   */
  readonly state?: readonly number[];
  /** For a control key: its hash fields. */
  readonly fields?: Readonly<Record<string, string>>;
}

/** What {@link RateLimitStore.inspect} returns. */
export interface StoreSnapshot {
  /** The store's time when the keys were read, in ms since the epoch. */
  readonly nowMs: number;
  readonly keys: readonly StoredKey[];
}

/**
 * A change to a control hash. `set` writes `field` = `"<untilMs>"` (with `value`,
 * `"<untilMs>:<value>"`) where `untilMs = now + ttlMs`, and `r:<field>` = `reason`; the hash
 * then expires at the later of its current expiry and `untilMs`. `remove` deletes a field
 * and its `r:` field. Fields whose `untilMs` has passed may be deleted by any change.
 */
export type ControlChange =
  | { readonly op: 'get' }
  | {
      readonly op: 'set';
      readonly field: string;
      readonly value?: string;
      /** **ms**, an integer from 1 to 2^31-1. */
      readonly ttlMs: number;
      readonly reason: string;
    }
  | { readonly op: 'remove'; readonly field: string };

/** A control hash after a {@link ControlChange}. */
export interface ControlSnapshot {
  /** The store's time, in ms since the epoch. */
  readonly nowMs: number;
  /** Every field of the hash, expired ones included unless pruned. */
  readonly fields: Readonly<Record<string, string>>;
  /** For `remove`: whether the field existed. */
  readonly removed?: boolean;
}
