import { ALGORITHM_IMPLS, decideAll, type State } from '../../algorithms/index.js';
import { algorithmTagOf, controlKeyOf } from '../../model/store-keys.js';
import { blockedOutcome, blockKeyOf, startsBlock } from '../../model/penalty.js';
import { changeControl, controlEffect, type Controls } from './control.js';
import { LeaseTable } from './leases.js';
import { memoryStoreSettings, type MemoryStoreOptions } from './options.js';
import type { Lease } from '../../algorithms/concurrency.js';
import { refundedState, spentOutcome, type StoreRefund } from '../../model/refund.js';
import type {
  ControlChange,
  ControlSnapshot,
  RateLimitStore,
  StoredKey,
  StoreOutcome,
  StorePolicy,
  StoreSnapshot,
} from '../store.js';

export type { MemoryStoreOptions } from './options.js';

/** Keys checked for expiry before a full store evicts a live one. */
const EVICTION_SWEEP = 64;

interface Entry {
  state: State;
  /** ms since the epoch, per the store's clock. */
  expiresAt: number;
}

/**
 * In-process store with the exact semantics of {@link RedisStore}, for single-process
 * apps, local development and unit tests. State is per process: several instances behind
 * a load balancer each count on their own, so use Redis there.
 *
 * Memory stays bounded: expired keys are dropped when read, and a single unreferenced
 * timer sweeps a slice of the keys at a time; `maxKeys` caps the total (200,000 by default,
 * about 500 bytes of heap each: about 100 MB). Only numbers are stored, never request objects.
 */
export class MemoryStore implements RateLimitStore {
  private readonly entries = new Map<string, Entry>();
  /** Control hashes (overrides, exemptions): few, written by operators, kept apart from `entries`. */
  private readonly controls: Controls = new Map();
  /** Leases of concurrency limits (see `concurrency.ts`). */
  private readonly leases = new LeaseTable();
  private readonly clock: () => number;
  private readonly maxKeys: number;
  private readonly sweepBatch: number;
  private cursor: Iterator<[string, Entry]> | undefined;
  private readonly timer: ReturnType<typeof setInterval> | undefined;

  /** @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_OPTION` for a non-positive `maxKeys` or `sweepBatch`, or a negative `sweepIntervalMs` */
  constructor(options: MemoryStoreOptions = {}) {
    const { clock, maxKeys, sweepBatch, every } = memoryStoreSettings(options);
    this.clock = clock;
    this.maxKeys = maxKeys;
    this.sweepBatch = sweepBatch;
    if (every > 0) {
      this.timer = setInterval(() => this.sweep(), every);
      this.timer.unref();
    }
  }

  /** Number of keys held, expired or not. */
  get size(): number {
    return this.entries.size;
  }

  /** The stored state of `key` (the algorithm's integers), or undefined; for inspection. */
  state(key: string): State | undefined {
    return this.read(key, this.clock());
  }

  /**
   * Like Redis `PTTL`: the **ms** left before `key` expires, or -2 when it does not exist
   * (or has expired). Keys here always expire, so -1 never occurs.
   */
  pttl(key: string): number {
    if (algorithmTagOf(key) === 'cc') return this.leases.pttl(key, this.clock());
    const entry = this.entries.get(key);
    const left = entry ? entry.expiresAt - this.clock() : 0;
    return left > 0 ? left : -2;
  }

  consume(policies: readonly StorePolicy[]): Promise<StoreOutcome[]> {
    const now = this.clock();
    const only = policies.length === 1 ? policies[0]! : undefined;
    // The usual request, decided without the arrays of the general path below: one rate
    // policy, no penalty, and no control hash in the store. test/unit/fast-paths.test.ts
    // holds it to the general path's outcomes and states.
    if (
      only &&
      this.controls.size === 0 &&
      only.blockMs === undefined &&
      only.algorithm !== 'concurrency'
    ) {
      const o = ALGORITHM_IMPLS[only.algorithm].evaluate(this.read(only.key, now), now, only);
      if (o.state) this.write(only.key, o.state, now + o.ttlMs!);
      return Promise.resolve([spentOutcome(o, only)]);
    }
    // Overrides and exemptions, as the Redis script applies them (see CONSUME_SCRIPT).
    // With no control hash at all (the usual case), no key to derive per policy.
    const effects =
      this.controls.size === 0
        ? policies.map((p) => ({ params: p }) as ReturnType<typeof controlEffect>)
        : policies.map((p) => controlEffect(p, this.controlFields(controlKeyOf(p.key)), now));
    const evaluations = policies.map((p, i) => ({
      impl: ALGORITHM_IMPLS[p.algorithm],
      state:
        p.algorithm !== 'concurrency'
          ? this.read(effects[i]!.params.key, now)
          : this.leases.read(p.key, now),
      params: effects[i]!.params,
      now,
    }));
    const blocks = policies.map((p, i) => this.blockOf(p, effects[i]!, now));
    const outcomes = decideAll(evaluations, blocks);
    outcomes.forEach((o, i) => {
      // An override's state expires with the override (see CONSUME_SCRIPT).
      const until = effects[i]!.untilMs ?? Infinity;
      const lease = policies[i]!.lease;
      if (o.state && lease !== undefined) this.leases.take(policies[i]!.key, lease, now + o.ttlMs!);
      else if (o.state)
        this.write(effects[i]!.params.key, o.state, Math.min(now + o.ttlMs!, until));
    });
    return Promise.resolve(
      outcomes.map((o, i): StoreOutcome => {
        const { allowed, remaining, resetMs, retryAfterMs } = o;
        const outcome = { allowed, remaining, resetMs, retryAfterMs };
        const { exempt, override } = effects[i]!;
        const policy = policies[i]!;
        if (blocks[i] !== undefined) return { ...outcome, blocked: true };
        if (startsBlock(policy, o, undefined, Boolean(exempt || override))) {
          const end = now + policy.blockMs!;
          this.write(blockKeyOf(policy.key), [end], end);
          if (policy.blockResets) this.entries.delete(policy.key);
          return { ...blockedOutcome(o, policy.blockMs!, policy.blockResets), blocked: true };
        }
        if (exempt) return { ...outcome, exempt };
        if (override) return { ...outcome, override };
        return spentOutcome(o, policy);
      }),
    );
  }

  /** See {@link RateLimitStore.refund} and `refund.ts`. */
  refund(refunds: readonly StoreRefund[]): Promise<number> {
    const now = this.clock();
    let given = 0;
    for (const refund of refunds) {
      const entry = this.entries.get(refund.key);
      const live = entry && entry.expiresAt > now ? entry : undefined;
      const after = refundedState(refund, live?.state, live?.expiresAt ?? 0, now);
      if (after === null) continue;
      given++;
      if (after === undefined) this.entries.delete(refund.key);
      else this.entries.set(refund.key, after);
    }
    return Promise.resolve(given);
  }

  /** See {@link RateLimitStore.release} and `concurrency.ts`. */
  release(leases: readonly Lease[]): Promise<number> {
    return Promise.resolve(this.leases.release(leases));
  }

  /**
   * The **ms** left of the policy's block in force, if any (see `penalty.ts`): set aside,
   * and deleted by a request that spends, under an exemption or override; started again by
   * a refusal under `extendBlock`.
   */
  private blockOf(
    policy: StorePolicy,
    effect: { exempt?: true; override?: unknown },
    now: number,
  ): number | undefined {
    if (policy.blockMs === undefined) return undefined;
    const key = blockKeyOf(policy.key);
    if (effect.exempt || effect.override) {
      if (policy.cost > 0) this.entries.delete(key);
      return undefined;
    }
    const end = this.read(key, now)?.[0];
    if (end === undefined || end <= now) return undefined;
    if (!policy.extendBlock || policy.cost === 0) return end - now;
    this.write(key, [now + policy.blockMs], now + policy.blockMs);
    return policy.blockMs;
  }

  deleteByPrefix(keyPrefix: string): Promise<number> {
    let deleted = this.leases.deleteByPrefix(keyPrefix);
    for (const key of this.entries.keys()) {
      if (key.startsWith(keyPrefix) && this.entries.delete(key)) deleted++;
    }
    return Promise.resolve(deleted);
  }

  /**
   * Every live key starting with `keyPrefix`, read at one instant; token bucket and GCRA
   * states (`[tatMs, ticks]` here) are given as the debt `[ms, ticks]` of {@link StoredKey.state}.
   */
  inspect(keyPrefix: string): Promise<StoreSnapshot> {
    const nowMs = this.clock();
    const keys: StoredKey[] = [];
    for (const [key, entry] of this.entries) {
      if (!key.startsWith(keyPrefix) || entry.expiresAt <= nowMs) continue;
      const tag = algorithmTagOf(key);
      const state =
        tag === 'tb' || tag === 'gcra' ? [entry.state[0]! - nowMs, entry.state[1]!] : entry.state;
      keys.push({ key, ttlMs: entry.expiresAt - nowMs, state });
    }
    for (const { key, expiries } of this.leases.inspect(keyPrefix, nowMs)) {
      keys.push({ key, ttlMs: expiries.at(-1)! - nowMs, state: expiries });
    }
    for (const [key, control] of this.controls) {
      if (!key.startsWith(keyPrefix) || control.expiresAt <= nowMs) continue;
      keys.push({
        key,
        ttlMs: control.expiresAt - nowMs,
        fields: Object.fromEntries(control.fields),
      });
    }
    return Promise.resolve({ nowMs, keys });
  }

  /** Same semantics as the Redis control script (see `RateLimitStore.control`), on this store's clock. */
  control(key: string, change: ControlChange): Promise<ControlSnapshot> {
    return Promise.resolve(changeControl(this.controls, key, change, this.clock()));
  }

  /**
   * The live fields of a control hash (see `controlKey`), or undefined; for the per-request
   * read of overrides and exemptions.
   */
  controlFields(key: string): ReadonlyMap<string, string> | undefined {
    const control = this.controls.get(key);
    if (!control) return undefined;
    if (control.expiresAt > this.clock()) return control.fields;
    this.controls.delete(key);
    return undefined;
  }

  /**
   * Drops expired keys among the next `batch` keys (default `sweepBatch`), continuing where
   * the last sweep stopped. Runs on its own timer; call it directly with an injected clock.
   * @returns how many keys were dropped
   */
  sweep(batch = this.sweepBatch): number {
    const now = this.clock();
    let dropped = 0;
    for (let i = 0; i < batch; i++) {
      this.cursor ??= this.entries.entries();
      const next = this.cursor.next();
      if (next.done) {
        this.cursor = undefined;
        break;
      }
      const [key, entry] = next.value;
      if (entry.expiresAt <= now && this.entries.delete(key)) dropped++;
    }
    for (const [key, control] of this.controls) {
      if (control.expiresAt <= now) this.controls.delete(key);
    }
    this.leases.sweep(now);
    return dropped;
  }

  close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.entries.clear();
    this.controls.clear();
    this.leases.clear();
    return Promise.resolve();
  }

  private read(key: string, now: number): State | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt > now) return entry.state;
    this.entries.delete(key);
    return undefined;
  }

  private write(key: string, state: State, expiresAt: number): void {
    // Re-inserting keeps the Map in least-recently-written order, which is what gets dropped when full.
    this.entries.delete(key);
    this.entries.set(key, { state, expiresAt });
    if (this.entries.size > this.maxKeys) {
      // Expired keys go first; only if none is found does a live one, the least recently
      // written, give way (and that identity gets a fresh budget).
      // A small slice only: a flood of new identities into a full store must stay cheap.
      if (this.sweep(EVICTION_SWEEP) === 0) this.entries.delete(this.entries.keys().next().value!);
    }
  }
}
