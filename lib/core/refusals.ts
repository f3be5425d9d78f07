import type { Decision, KnownRefusal, PolicyDecision } from './decision.js';
import type { StorePolicy } from './stores/store.js';

/** Options of {@link RecentRefusals}; for tests, the defaults otherwise. */
export interface RecentRefusalsOptions {
  /** Most refusals kept; the oldest go first. Default 10,000. */
  maxEntries?: number;
  /** Most bytes kept, keys and entries counted; the oldest go first. Default 2 MiB. */
  maxBytes?: number;
  /** The local clock, in ms. Default `performance.now`: monotonic. */
  clock?: () => number;
}

interface Refused {
  readonly name: string;
  readonly limit: number;
  readonly remaining: number;
  /** When the store refused, on the local clock. */
  readonly at: number;
  readonly resetMs: number;
  readonly retryAfterMs: number;
  readonly blocked: boolean;
  /** What this entry is counted as against `maxBytes`. */
  readonly bytes: number;
}

/** A Map entry, the object and its numbers, beside its key and name: a generous estimate. */
const ENTRY_BYTES = 160;

/**
 * A refusal remembered less than this long ago (ms) is left as it is when the store refuses
 * again (a client hammering while refused: every request), as long as its wait covers the new
 * one to within this long: a refusal then ends at most this much early, and the oldest-first
 * order needs no finer grain. Saves a Map delete, set and an object per refusal.
 */
const REFRESH_MS = 100;

/**
 * The refusals this process saw the store make, per policy state key, until their wait is
 * over: what the limiter still knows when the store fails (an error, a timeout, the circuit
 * breaker open, Redis out of memory or read-only), so that a client already over its limit
 * is refused rather than admitted fail-open. Kept whether or not the deny cache is on: the
 * deny cache answers in place of the store, this only where the store cannot answer.
 *
 * Identities are client input, so the record is bounded in entries and in bytes, the oldest
 * going first. Its keys are the store's keys, whose identity part is at most 64 characters
 * (a longer identity is hashed: see `identityTag`), so one entry is a few hundred bytes at most.
 */
export class RecentRefusals {
  private readonly entries = new Map<string, Refused>();
  private bytes = 0;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private readonly clock: () => number;

  constructor(options: RecentRefusalsOptions = {}) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.maxBytes = options.maxBytes ?? 2 * 1024 * 1024;
    this.clock = options.clock ?? (() => performance.now());
  }

  /** Refusals kept. */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes they are counted as. */
  get heldBytes(): number {
    return this.bytes;
  }

  /**
   * Keeps each policy of `decision` that refused for a while: not a concurrency limit (its
   * slots come back any moment), not a cost that can never be admitted, not a peek.
   */
  remember(policies: readonly StorePolicy[], decision: Decision): void {
    let at: number | undefined;
    const decided = decision.policies;
    for (let i = 0; i < decided.length; i++) {
      const d = decided[i]!;
      const p = policies[i]!;
      if (d.allowed || !(d.retryAfterMs > 0 && d.retryAfterMs < Infinity)) continue;
      if (p.cost === 0 || p.algorithm === 'concurrency') continue;
      at ??= this.clock();
      const found = this.entries.get(p.key);
      if (found !== undefined) {
        const age = at - found.at;
        if (age >= 0 && age < REFRESH_MS && found.retryAfterMs - age + REFRESH_MS >= d.retryAfterMs)
          continue;
        this.drop(p.key);
      }
      const refused: Refused = {
        name: d.name,
        limit: d.limit,
        remaining: d.remaining,
        at,
        resetMs: d.resetMs,
        retryAfterMs: d.retryAfterMs,
        blocked: d.blocked === true,
        bytes: ENTRY_BYTES + 2 * (p.key.length + d.name.length),
      };
      this.entries.set(p.key, refused);
      this.bytes += refused.bytes;
    }
    while (this.entries.size > this.maxEntries || this.bytes > this.maxBytes) {
      this.drop(this.entries.keys().next().value!);
    }
  }

  /**
   * The refusal of these policies still in force, counted down to now; undefined when
   * none of them was refused, or its wait is over.
   */
  refusal(policies: readonly StorePolicy[]): KnownRefusal | undefined {
    if (this.entries.size === 0) return undefined;
    const now = this.clock();
    let indexes: number[] | undefined;
    let decided: PolicyDecision[] | undefined;
    for (let i = 0; i < policies.length; i++) {
      const p = policies[i]!;
      if (p.cost === 0 || p.algorithm === 'concurrency') continue;
      const found = this.entries.get(p.key);
      if (found === undefined) continue;
      // Whole ms, rounded down: a wait stays an upper bound and an integer.
      const elapsed = Math.floor(now - found.at);
      // A clock that stepped back drops it too, rather than keep it longer.
      if (elapsed >= found.retryAfterMs || elapsed < 0) {
        this.drop(p.key);
        continue;
      }
      (indexes ??= []).push(i);
      (decided ??= []).push({
        name: found.name,
        allowed: false,
        limit: found.limit,
        remaining: found.remaining,
        resetMs: Math.max(0, found.resetMs - elapsed),
        retryAfterMs: Math.max(1, found.retryAfterMs - elapsed),
        ...(found.blocked && { blocked: true as const }),
      });
    }
    if (indexes === undefined) return undefined;
    return {
      decision: { allowed: false, cached: true, reason: 'limit_exceeded', policies: decided! },
      indexes,
    };
  }

  /** Forgets every refusal of this identity key prefix (`<prefix>:{<tag>}:`): a reset, a control change. */
  forget(identityPrefix: string): void {
    for (const key of this.entries.keys()) {
      if (key.startsWith(identityPrefix)) this.drop(key);
    }
  }

  private drop(key: string): void {
    const found = this.entries.get(key);
    if (found === undefined) return;
    this.entries.delete(key);
    this.bytes -= found.bytes;
  }
}
