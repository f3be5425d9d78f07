import type { Decision, Policy } from '../core/policy.js';
import { RateLimiter } from '../core/limiter.js';
import { MemoryStore } from '../core/stores/memory-store.js';
import { RATE_LIMIT_EVENTS, type RateLimitEvents } from './events.js';
import type { Entry } from './policies.js';

/**
 * Insurance limits (`onStoreFailure: 'local'`): while the store fails, this process enforces
 * its share of each policy, `ceil(limit / instances)`, in its own memory, with the same
 * algorithm (a {@link MemoryStore} under a {@link RateLimiter}, as the memory backend does).
 * When the store answers again the local state is dropped, never written back: the shared
 * count, not this process's guess, is what counts once it is there.
 */
export class Insurance {
  private limiter: RateLimiter | undefined;
  private store: MemoryStore | undefined;
  /** Scaled copies of policies, so each request does not rebuild them. */
  private readonly shares = new WeakMap<Policy, Policy>();

  /**
   * @param instances processes sharing the store (the module's `instances`), >= 1
   * @param prefix the module's key prefix, kept so local keys read like the store's
   */
  constructor(
    private readonly instances: number,
    private readonly prefix: string | undefined,
    private readonly events: RateLimitEvents,
  ) {}

  /** True while local limits are in force (since a store failure, until its next answer). */
  get inForce(): boolean {
    return this.limiter !== undefined;
  }

  /**
   * Decides `entries` in memory at this process's share of each limit. The decision's
   * policies carry the shares, so headers and `Retry-After` describe the local decision.
   * Logs `rate_limit.insurance` (throttled per route).
   */
  async decide(
    entries: readonly Entry[],
    route: string,
  ): Promise<{ decision: Decision; local: Entry[] }> {
    const local = entries.map(({ rule, entry }) => ({
      rule,
      entry: { ...entry, policy: this.share(entry.policy as Policy) },
    }));
    // No timeout and no breaker: memory answers synchronously underneath.
    if (this.limiter === undefined) {
      this.store = new MemoryStore();
      this.limiter = new RateLimiter({
        store: this.store,
        ...(this.prefix !== undefined && { prefix: this.prefix }),
        circuitBreaker: false,
      });
    }
    this.events.throttled(RATE_LIMIT_EVENTS.insurance, route, {
      route,
      instances: this.instances,
      policies: local.map(({ entry }) => `${entry.policy.name}=${(entry.policy as Policy).limit}`),
    });
    const decision = await this.limiter.consumeEach(local.map((e) => e.entry));
    return { decision, local };
  }

  /** The store answered: local limits end, their state is dropped. */
  storeAnswered(): void {
    if (this.limiter === undefined) return;
    const store = this.store!;
    this.limiter = undefined;
    this.store = undefined;
    void store.close();
  }

  private share(policy: Policy): Policy {
    let scaled = this.shares.get(policy);
    if (scaled === undefined) {
      const part = (n: number) => Math.max(1, Math.ceil(n / this.instances));
      scaled = { ...policy, limit: part(policy.limit), capacity: part(policy.capacity) };
      this.shares.set(policy, scaled);
    }
    return scaled;
  }
}
