import type { Lease } from '../../algorithms/concurrency.js';
import type { State } from '../../algorithms/index.js';

/**
 * The leases of concurrency limits for MemoryStore (see `concurrency.ts`): per key, lease id
 * -> expiry in ms on the store's clock; what Redis keeps in a sorted set. Expired leases are
 * pruned whenever their key is read.
 */
export class LeaseTable {
  private readonly sets = new Map<string, Map<string, number>>();

  /** `[held, lastExpiryMs]` of the live leases under `key`, or undefined when none. */
  read(key: string, now: number): State | undefined {
    const set = this.prune(key, now);
    if (!set) return undefined;
    let last = 0;
    for (const end of set.values()) last = Math.max(last, end);
    return [set.size, last];
  }

  take(key: string, id: string, expiresAt: number): void {
    let set = this.sets.get(key);
    if (!set) this.sets.set(key, (set = new Map()));
    set.set(id, expiresAt);
  }

  /** @returns how many of the leases were held (and are now free) */
  release(leases: readonly Lease[]): number {
    let freed = 0;
    for (const { key, id } of leases) {
      const set = this.sets.get(key);
      if (set?.delete(id)) freed++;
      if (set?.size === 0) this.sets.delete(key);
    }
    return freed;
  }

  deleteByPrefix(keyPrefix: string): number {
    let deleted = 0;
    for (const key of this.sets.keys()) {
      if (key.startsWith(keyPrefix) && this.sets.delete(key)) deleted++;
    }
    return deleted;
  }

  /** The live lease expiries under each key that starts with `keyPrefix`, sorted. */
  *inspect(keyPrefix: string, now: number): Generator<{ key: string; expiries: number[] }> {
    for (const key of [...this.sets.keys()]) {
      if (!key.startsWith(keyPrefix)) continue;
      const set = this.prune(key, now);
      if (set) yield { key, expiries: [...set.values()].sort((a, b) => a - b) };
    }
  }

  /** Drops every expired lease (MemoryStore's sweep). */
  sweep(now: number): void {
    for (const key of [...this.sets.keys()]) this.prune(key, now);
  }

  /** Milliseconds until the last lease under `key` expires, like Redis `PTTL` (-2: none). */
  pttl(key: string, now: number): number {
    const state = this.read(key, now);
    return state ? state[1]! - now : -2;
  }

  clear(): void {
    this.sets.clear();
  }

  private prune(key: string, now: number): Map<string, number> | undefined {
    const set = this.sets.get(key);
    if (!set) return undefined;
    for (const [id, end] of set) if (end <= now) set.delete(id);
    if (set.size > 0) return set;
    this.sets.delete(key);
    return undefined;
  }
}
