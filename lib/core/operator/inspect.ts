import { ALGORITHM_IMPLS } from '../algorithms/index.js';
import { applicableOverride, type OverrideEntry } from './control.js';
import { baseKeyOf, isControlKey, scopeAndNameOf } from '../model/store-keys.js';
import { blockKeyOf } from '../model/penalty.js';
import {
  ALGORITHMS,
  toPolicy,
  type Policy,
  type PolicyAlgorithm,
  type PolicyInput,
} from '../model/policy.js';
import { CONCURRENCY_TAG } from '../algorithms/concurrency.js';
import type { StoreSnapshot } from '../stores/store.js';

/** Options of `RateLimiter.inspect`. */
export interface InspectOptions {
  /** Only this scope's policies (the whole identity is read all the same). */
  scope?: string;
  /**
   * Policies to recognise; one without a `scope` of its own is recognised in every
   * scope. Matched by scope, name and algorithm.
   */
  policies?: readonly (Policy | PolicyInput)[];
  /** Another way to recognise policies, asked after `policies`. */
  known?: (scope: string, name: string, algorithm: PolicyAlgorithm) => KnownPolicy | undefined;
}

/** `RateLimiter.inspect`'s answer from what the store read under `identityPrefix`. */
export function inspectedOf(
  snapshot: StoreSnapshot,
  identityPrefix: string,
  { scope, policies = [], known }: InspectOptions,
): InspectedPolicy[] {
  const given = policies.map((p) => toPolicy(p));
  const states = describeSnapshot(snapshot, identityPrefix, (s, name, algorithm) => {
    const match = given.find(
      (p) => p.name === name && p.algorithm === algorithm && (p.scope ?? s) === s,
    );
    return match ?? known?.(s, name, algorithm);
  });
  return scope === undefined ? states : states.filter((s) => s.scope === scope);
}

/**
 * The stored state of one policy, by algorithm. Times in **ms** since the epoch on the
 * store's clock (the Redis server's), durations in **ms**.
 */
export type InspectedState =
  /** The theoretical arrival time (TAT), rounded up to the ms. */
  | { readonly tatMs: number }
  /**
   * Token bucket: the tokens in the bucket (may be fractional: `3/s` refills one every
   * 333.3 ms) when the policy is known; else only the debt, the time until it is full.
   */
  | { readonly tokens: number }
  | { readonly debtMs: number }
  /** Fixed window: units spent in the window, and when it closes. */
  | { readonly count: number; readonly windowEndMs: number }
  /**
   * Sliding window: the window index (`floor(now / periodMs)`) and the counts of it and the
   * one before. The index is absent when the store keeps the window in the key's expiry
   * (RedisStore on its server clock) and the policy is not known.
   */
  | { readonly windowIndex?: number; readonly current: number; readonly previous: number }
  /** Sliding log: the hits of the last period, in ms since the epoch, ascending, one per unit. */
  | { readonly hitsMs: readonly number[] }
  /**
   * Concurrency limit: the slots held (requests in flight), and when each one's lease
   * expires, in ms since the epoch, ascending (a slot not given back frees itself then).
   */
  | { readonly held: number; readonly leaseExpiriesMs: readonly number[] };

/** One stored policy state of an identity, as `inspect` reports it. */
export interface InspectedPolicy {
  /** The store key. */
  readonly key: string;
  readonly scope: string;
  /** The policy name. */
  readonly policy: string;
  /** `'concurrency'` for a concurrency limit. */
  readonly algorithm: PolicyAlgorithm;
  /** **ms** until the state is back to full (nothing spent; for a concurrency limit, until its last lease expires). */
  readonly resetMs: number;
  readonly state: InspectedState;
  /** When the policy is known (or an override applies): units per period in force. */
  readonly limit?: number;
  /**
   * When the policy is known (or an override applies): units that may be spent now (up to
   * the `burst` of a token bucket or GCRA, which may be above `limit`).
   */
  readonly remaining?: number;
  /** The override in force for this policy, if any. */
  readonly override?: Omit<OverrideEntry, 'scope' | 'policy' | 'reason'>;
  /** **ms** left of a penalty (`block`) in force for this policy, if any. */
  readonly blockedMs?: number;
  /** When that penalty ends, in ms since the epoch on the store's clock. */
  readonly blockedUntilMs?: number;
}

/** A policy the caller knows the rate of, to report `limit` and `remaining`. */
export interface KnownPolicy {
  readonly limit: number;
  /** **ms**. */
  readonly periodMs: number;
  /** `burst ?? limit` for token bucket and GCRA, the limit for the windows. */
  readonly capacity: number;
}

const BY_TAG = new Map(ALGORITHMS.map((a) => [ALGORITHM_IMPLS[a].tag, a]));

/**
 * Turns what a store read (see `RateLimitStore.inspect`) into one entry per policy key
 * under `identityPrefix` (`<prefix>:{<tag>}:`), sorted by key.
 * `known` gives the rate of a policy by scope, name and algorithm, when there is one.
 */
function describeSnapshot(
  snapshot: StoreSnapshot,
  identityPrefix: string,
  known: (scope: string, name: string, algorithm: PolicyAlgorithm) => KnownPolicy | undefined,
): InspectedPolicy[] {
  const { nowMs } = snapshot;
  const control = snapshot.keys.find((k) => isControlKey(k.key))?.fields ?? {};
  const out: InspectedPolicy[] = [];
  const byKey = new Map(snapshot.keys.map((k) => [k.key, k]));
  // A policy may have state only under an override (`<key>:o<untilMs>`), or only a block
  // (`<key>:b`, see penalty.ts): list it by its key.
  const keys = new Set(
    snapshot.keys.map((k) => baseKeyOf(k.key.endsWith(':b') ? k.key.slice(0, -2) : k.key)),
  );
  for (const key of keys) {
    if (!key.startsWith(identityPrefix)) continue;
    const rest = key.slice(identityPrefix.length);
    const parts = rest.split(':');
    if (parts.length !== 3) continue;
    const [scope, name] = scopeAndNameOf(rest);
    if (parts[2] === CONCURRENCY_TAG) {
      const slots = describeSlots(byKey.get(key)?.state, nowMs, scope, name, known);
      if (slots) out.push({ key, ...slots });
      continue;
    }
    const algorithm = BY_TAG.get(parts[2]!);
    if (algorithm === undefined) continue;
    const override = applicableOverride(control, nowMs, scope, name);
    // Each override runs on state of its own (see CONSUME_SCRIPT): that is the state in force.
    const stored = byKey.get(override ? `${key}:o${nowMs + override.expiresInMs}` : key);
    // A block's state is its end, in ms on the store's clock.
    const end = byKey.get(blockKeyOf(key))?.state?.[0];
    const blockedMs = end !== undefined && end > nowMs ? end - nowMs : undefined;
    if (stored?.state === undefined && !override && blockedMs === undefined) continue;
    // An override not used yet, or a block that outlived the state: the state is fresh.
    const fresh = !override
      ? algorithm === 'fixed-window'
        ? [0, nowMs]
        : algorithm === 'sliding-window'
          ? [0, 0, 0]
          : algorithm === 'sliding-log'
            ? []
            : [0, 0]
      : algorithm === 'fixed-window'
        ? [0, nowMs]
        : algorithm === 'sliding-window'
          ? [Math.floor(nowMs / override.periodMs), 0, 0]
          : algorithm === 'sliding-log'
            ? []
            : [0, 0];
    const { ttlMs, state: read } =
      stored?.state === undefined
        ? { ttlMs: 0, state: fresh }
        : { ttlMs: stored.ttlMs, state: stored.state };
    const windowed = ALGORITHM_IMPLS[algorithm].lua.kind !== 'debt';
    const policy: KnownPolicy | undefined = override
      ? {
          limit: override.limit,
          periodMs: override.periodMs,
          capacity: windowed ? override.limit : (override.burst ?? override.limit),
        }
      : known(scope, name, algorithm);
    // A sliding window whose window is the key's expiry (see StoredKey.state): it ends one
    // period before the key, so its index is known with the period.
    const packed = algorithm === 'sliding-window' && read.length === 2;
    const state =
      packed && policy ? [Math.round((nowMs + ttlMs) / policy.periodMs) - 2, ...read] : read;
    // The key the state is read from: under an override, the override's own.
    const base = {
      key: override ? `${key}:o${nowMs + override.expiresInMs}` : key,
      scope,
      policy: name,
      algorithm,
      ...(override && { override }),
      ...(blockedMs !== undefined && { blockedMs, blockedUntilMs: end }),
    };
    if (!windowed) {
      const [ms, ticks] = state as [number, number];
      if (!policy) {
        // Without the limit, the debt is known to the ms, rounded up.
        const debtMs = Math.max(0, ticks > 0 ? ms + 1 : ms);
        const shown = algorithm === 'gcra' ? { tatMs: nowMs + debtMs } : { debtMs };
        out.push({ ...base, resetMs: debtMs, state: shown });
        continue;
      }
      const { limit: L, periodMs: P, capacity } = policy;
      const tau = capacity * P;
      const debt = Math.min(tau, Math.max(0, ms * L + ticks));
      const resetMs = Math.ceil(debt / L);
      out.push({
        ...base,
        resetMs,
        state: algorithm === 'gcra' ? { tatMs: nowMs + resetMs } : { tokens: (tau - debt) / P },
        limit: L,
        remaining: Math.floor((tau - debt) / P),
      });
      continue;
    }
    const shown =
      algorithm === 'fixed-window'
        ? { count: state[0]!, windowEndMs: state[1]! }
        : algorithm === 'sliding-log'
          ? { hitsMs: policy ? state.filter((t) => t > nowMs - policy.periodMs) : [...state] }
          : packed && !policy
            ? { current: state[0]!, previous: state[1]! }
            : { windowIndex: state[0]!, current: state[1]!, previous: state[2]! };
    if (!policy) {
      // The window end, or for a sliding window the key's expiry: both when the state is empty.
      const resetMs =
        algorithm === 'fixed-window' ? Math.max(0, state[1]! - nowMs) : Math.max(0, ttlMs);
      out.push({ ...base, resetMs, state: shown });
      continue;
    }
    const outcome = ALGORITHM_IMPLS[algorithm].evaluate(state, nowMs, { ...policy, cost: 0 });
    out.push({
      ...base,
      resetMs: outcome.resetMs,
      state: shown,
      limit: policy.limit,
      remaining: outcome.remaining,
    });
  }
  return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** A concurrency limit's entry (see `concurrency.ts`), or undefined when no slot is held. */
function describeSlots(
  expiries: readonly number[] | undefined,
  nowMs: number,
  scope: string,
  name: string,
  known: (scope: string, name: string, algorithm: PolicyAlgorithm) => KnownPolicy | undefined,
): Omit<InspectedPolicy, 'key'> | undefined {
  const live = (expiries ?? []).filter((end) => end > nowMs);
  if (live.length === 0) return undefined;
  const policy = known(scope, name, 'concurrency');
  return {
    scope,
    policy: name,
    algorithm: 'concurrency',
    resetMs: Math.max(...live) - nowMs,
    state: { held: live.length, leaseExpiriesMs: live },
    ...(policy && { limit: policy.limit, remaining: Math.max(0, policy.limit - live.length) }),
  };
}
