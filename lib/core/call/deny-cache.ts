import { quote, RateLimitConfigError } from '../errors.js';
import type { Decision } from '../model/policy.js';
import type { StorePolicy } from '../stores/store.js';

/** Options of the local deny cache. Durations in **ms**. */
export interface DenyCacheOptions {
  /** Remember only denials whose `Retry-After` is at least this long. Default 1000. */
  minRetryAfterMs?: number;
  /**
   * Longest time a denial is answered from memory before the store is asked again: the
   * bound on how long another instance's reset, override or exemption takes to be seen
   * here (this process's own are seen at once). Default 1000.
   */
  maxAgeMs?: number;
  /** Most denials remembered; the least recently used go first. Default 10,000. */
  maxEntries?: number;
  /**
   * **Tests only.** The local clock, in ms. Default `performance.now`: monotonic, so a
   * wall clock stepped back never keeps a denial longer.
   */
  clock?: () => number;
}

interface Remembered {
  readonly decision: Decision;
  /** When the decision was made, on the local clock. */
  readonly at: number;
  /** When to ask the store again: the earlier of the denial's end and `at + maxAgeMs`. */
  readonly until: number;
  /** Identity key prefixes (`<prefix>:{<tag>}:`) of the policies: what invalidates it. */
  readonly identities: readonly string[];
}

/**
 * Remembers recent long denials, so that a client that keeps calling while refused is
 * answered from memory instead of from Redis. Keyed by the whole request (its policy keys
 * and costs): the same request is refused the same way until its wait is over, with
 * `Retry-After` and reset counted down. A bounded LRU (a Map in use order).
 */
export class DenyCache {
  private readonly entries = new Map<string, Remembered>();
  private readonly minRetryAfterMs: number;
  private readonly maxAgeMs: number;
  private readonly maxEntries: number;
  private readonly clock: () => number;

  /** @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION` for a bad option */
  constructor(options: DenyCacheOptions = {}) {
    const { minRetryAfterMs = 1000, maxAgeMs = 1000, maxEntries = 10_000 } = options;
    for (const [name, value] of Object.entries({ minRetryAfterMs, maxAgeMs, maxEntries })) {
      if (!Number.isSafeInteger(value) || value < (name === 'minRetryAfterMs' ? 0 : 1)) {
        throw new RateLimitConfigError(
          'ERR_RATE_LIMIT_OPTION',
          `invalid denyCache.${name} ${quote(value)}: expected an integer >= ${name === 'minRetryAfterMs' ? 0 : 1}`,
          'RateLimiter',
        );
      }
    }
    this.minRetryAfterMs = minRetryAfterMs;
    this.maxAgeMs = maxAgeMs;
    this.maxEntries = maxEntries;
    this.clock = options.clock ?? (() => performance.now());
  }

  /** The remembered denial of this request, counted down to now; undefined if none. */
  get(signature: string): Decision | undefined {
    const found = this.entries.get(signature);
    if (!found) return undefined;
    const now = this.clock();
    if (now >= found.until || now < found.at) {
      this.entries.delete(signature);
      return undefined;
    }
    // Refresh its place in the LRU order.
    this.entries.delete(signature);
    this.entries.set(signature, found);
    // Whole ms, rounded down: a wait stays an upper bound and an integer.
    const elapsed = Math.floor(now - found.at);
    const { decision } = found;
    return {
      ...decision,
      cached: true,
      policies: decision.policies.map((p) => ({
        ...p,
        resetMs: Math.max(0, p.resetMs - elapsed),
        retryAfterMs: p.allowed ? 0 : Math.max(1, p.retryAfterMs - elapsed),
      })),
    };
  }

  /** Remembers a denial if it is long enough; `identities` are its key prefixes. */
  remember(signature: string, decision: Decision, identities: readonly string[]): void {
    if (decision.allowed) return;
    const wait = Math.max(
      ...decision.policies.filter((p) => !p.allowed).map((p) => p.retryAfterMs),
    );
    if (!(wait >= this.minRetryAfterMs)) return;
    const at = this.clock();
    this.entries.delete(signature);
    this.entries.set(signature, {
      decision,
      at,
      until: at + Math.min(wait, this.maxAgeMs),
      identities,
    });
    if (this.entries.size > this.maxEntries) {
      this.entries.delete(this.entries.keys().next().value!);
    }
  }

  /** Forgets every denial that involves this identity key prefix (`<prefix>:{<tag>}:`). */
  invalidate(identityPrefix: string): void {
    for (const [signature, entry] of this.entries) {
      if (entry.identities.includes(identityPrefix)) this.entries.delete(signature);
    }
  }

  get size(): number {
    return this.entries.size;
  }
}

/** What the deny cache knows a request by: each policy's key, cost and rate. */
export function signatureOf(policies: readonly StorePolicy[]): string {
  let signature = '';
  for (const p of policies) signature += `${p.key}\0${p.cost}\0${p.limit}/${p.periodMs}\n`;
  return signature;
}
