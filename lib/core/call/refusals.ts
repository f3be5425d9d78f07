import type { Decision, KnownRefusal, PolicyDecision } from '../model/decision.js';
import type { StorePolicy } from '../stores/store.js';

/** Options of {@link RecentRefusals}; for tests, the defaults otherwise. */
export interface RecentRefusalsOptions {
  /** Most keys kept; the least recently refused go first. Default 10,000. */
  maxEntries?: number;
  /** Most bytes kept, keys and entries counted; the least recently refused go first. Default 2 MiB. */
  maxBytes?: number;
  /** The local clock, in ms. Default `performance.now`: monotonic. */
  clock?: () => number;
}

/**
 * One policy state key the store refused: a token bucket at the rate the store decided with,
 * carried on locally from its last answer for the key (a refusal, or an admission since).
 */
interface Known {
  readonly name: string;
  limit: number;
  periodMs: number;
  capacity: number;
  /** Tokens at `ts` (local clock, ms): below the cost refused while its wait runs. */
  tokens: number;
  ts: number;
  /** The end of a penalty's block (local clock, ms); 0 for none. */
  blockedUntil: number;
  /** What this entry is counted as against `maxBytes`. */
  readonly bytes: number;
}

/** A Map entry, the object and its numbers, beside its key and name: a generous estimate. */
const ENTRY_BYTES = 192;

/**
 * A key refused again less than this long (ms) after its last refusal is updated in place,
 * not moved to the young end of the order (a client hammering while refused: every request):
 * the least-recently-refused order needs no finer grain, and this saves a Map delete, set and
 * an object per refusal.
 */
const REFRESH_MS = 100;

/**
 * What this process saw the store refuse, per policy state key: what the limiter still knows
 * when the store fails (an error, a timeout, the circuit breaker open, Redis out of memory or
 * read-only), so that a client over its limit is not admitted fail-open. A refused key is
 * refused until its wait is over, then held to the policy's own rate (a token bucket carried
 * on from the store's last answer for it) for as long as the store still fails: it gets what
 * the store would have let through meanwhile, and no more. Each answer of the store for the
 * key resets it, so the local bucket only ever runs while the store is away. Kept whether or
 * not the deny cache is on: the deny cache answers in place of the store, this only where the
 * store cannot answer. A window algorithm is carried on as a bucket at the same rate, which
 * lets a client through no faster than its window would.
 *
 * Identities are client input, so the record is bounded in entries and in bytes, the least
 * recently refused going first. Its keys are the store's keys, whose identity part is at most
 * 64 characters (a longer identity is hashed: see `identityTag`), so an entry is a few hundred
 * bytes at most.
 */
export class RecentRefusals {
  private readonly entries = new Map<string, Known>();
  private bytes = 0;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private readonly clock: () => number;

  constructor(options: RecentRefusalsOptions = {}) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.maxBytes = options.maxBytes ?? 2 * 1024 * 1024;
    this.clock = options.clock ?? (() => performance.now());
  }

  /** Keys kept. */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes they are counted as. */
  get heldBytes(): number {
    return this.bytes;
  }

  /**
   * Learns from the store's decision: each policy it refused for a while is kept (not a
   * concurrency limit, whose slots come back any moment, nor a cost that can never pass, nor
   * a peek); a kept key it admitted is reset to what the store says remains.
   */
  remember(policies: readonly StorePolicy[], decision: Decision): void {
    let now: number | undefined;
    const decided = decision.policies;
    for (let i = 0; i < decided.length; i++) {
      const d = decided[i]!;
      const p = policies[i]!;
      if (p.cost === 0 || p.algorithm === 'concurrency') continue;
      if (d.allowed) {
        if (this.entries.size === 0) continue;
        const found = this.entries.get(p.key);
        if (found === undefined) continue;
        if (d.exempt || d.remaining >= found.capacity) this.drop(p.key);
        else {
          found.tokens = d.remaining;
          found.ts = now ??= this.clock();
          found.blockedUntil = 0;
        }
        continue;
      }
      if (!(d.retryAfterMs > 0 && d.retryAfterMs < Infinity)) continue;
      now ??= this.clock();
      const periodMs = d.override?.periodMs ?? p.periodMs;
      // The bucket that makes this refusal's wait: `cost` tokens `retryAfterMs` from now.
      const tokens = p.cost - (d.retryAfterMs * d.limit) / periodMs;
      const blockedUntil = d.blocked ? now + d.retryAfterMs : 0;
      const found = this.entries.get(p.key);
      if (found !== undefined && now - found.ts >= 0 && now - found.ts < REFRESH_MS) {
        found.tokens = tokens;
        found.ts = now;
        found.blockedUntil = blockedUntil;
        continue;
      }
      if (found !== undefined) this.drop(p.key);
      const known: Known = {
        name: d.name,
        limit: d.limit,
        periodMs,
        capacity: d.override ? d.limit : p.capacity,
        tokens,
        ts: now,
        blockedUntil,
        bytes: ENTRY_BYTES + 2 * (p.key.length + d.name.length),
      };
      this.entries.set(p.key, known);
      this.bytes += known.bytes;
    }
    while (this.entries.size > this.maxEntries || this.bytes > this.maxBytes) {
      this.drop(this.entries.keys().next().value!);
    }
  }

  /**
   * What is known against this request while the store cannot be asked: the refusal of its
   * policies whose bucket holds less than the cost (waits counted from now); undefined when
   * none, and then the request's cost is taken from the buckets of its kept keys, as the
   * store would have (whatever the route then decides: a fail-closed route's 503 spends too,
   * which only ever refuses sooner).
   */
  refusal(policies: readonly StorePolicy[]): KnownRefusal | undefined {
    if (this.entries.size === 0) return undefined;
    const now = this.clock();
    let indexes: number[] | undefined;
    let decided: PolicyDecision[] | undefined;
    let spending: Known[] | undefined;
    let costs: number[] | undefined;
    for (let i = 0; i < policies.length; i++) {
      const p = policies[i]!;
      if (p.cost === 0 || p.algorithm === 'concurrency') continue;
      const k = this.entries.get(p.key);
      if (k === undefined) continue;
      // A clock that stepped back drops it, rather than keep it longer.
      if (now < k.ts) {
        this.drop(p.key);
        continue;
      }
      const perMs = k.limit / k.periodMs;
      const tokens = Math.min(k.capacity, k.tokens + (now - k.ts) * perMs);
      const blocked = now < k.blockedUntil;
      if (tokens >= k.capacity && !blocked) {
        // Full again: nothing is known against it any more.
        this.drop(p.key);
        continue;
      }
      k.tokens = tokens;
      k.ts = now;
      if (tokens >= p.cost && !blocked) {
        (spending ??= []).push(k);
        (costs ??= []).push(p.cost);
        continue;
      }
      // Rounded up, less a hair of floating-point error: a wait stays an upper bound.
      const waitMs = Math.max(1, Math.ceil((p.cost - tokens) / perMs - 1e-6));
      (indexes ??= []).push(i);
      (decided ??= []).push({
        name: k.name,
        allowed: false,
        limit: k.limit,
        remaining: Math.max(0, Math.floor(tokens)),
        resetMs: Math.ceil((k.capacity - tokens) / perMs - 1e-6),
        retryAfterMs: blocked ? Math.max(waitMs, Math.ceil(k.blockedUntil - now)) : waitMs,
        ...(blocked && { blocked: true as const }),
      });
    }
    if (indexes !== undefined) {
      return {
        decision: { allowed: false, cached: true, reason: 'limit_exceeded', policies: decided! },
        indexes,
      };
    }
    // All-or-nothing, as in the store: spent only once no policy refuses.
    if (spending !== undefined)
      for (let j = 0; j < spending.length; j++) spending[j]!.tokens -= costs![j]!;
    return undefined;
  }

  /** Forgets every key of this identity key prefix (`<prefix>:{<tag>}:`): a reset, a control change. */
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
