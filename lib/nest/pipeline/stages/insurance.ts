import type { Decision, Policy } from '../../../core/model/policy.js';
import { RateLimiter } from '../../../core/limiter.js';
import { MemoryStore } from '../../../core/stores/memory/memory-store.js';
import { RATE_LIMIT_EVENTS, type RateLimitEvents } from '../../observability/events.js';
import type { Entry } from '../entry-resolver.js';

/**
 * Insurance limits (`onStoreFailure: 'local'`): while the store fails, this process enforces
 * its share of each policy, `ceil(limit / instances)` (at least 1), in its own memory, with the
 * same algorithm (a {@link MemoryStore} under a {@link RateLimiter}, as the memory backend does).
 * When the store answers again, decisions go back to it; the local counts are never written
 * back (the shared count, not this process's guess, is what counts once it is there), but
 * they are kept until their own period ends: they are admissions the store never saw, and a
 * store that answers now and then (out of memory, overloaded) must not hand every client a
 * fresh local share with each answer.
 */
export class Insurance {
  private limiter: RateLimiter | undefined;
  private failing = false;
  /** Scaled copies of policies, so each request does not rebuild them; for `sharedBy`. */
  private shares = new WeakMap<Policy, Policy>();
  private sharedBy: number | undefined;

  /**
   * @param instances processes sharing the store, >= 1 (given or learned: see
   *   `InstanceCount`); undefined when unknown, as in a process that never reached the
   *   store: then each policy's share is 1 per period, the least that still serves anyone
   * @param prefix the module's key prefix, kept so local keys read like the store's
   */
  constructor(
    private readonly instances: () => number | undefined,
    private readonly prefix: string | undefined,
    private readonly events: RateLimitEvents,
  ) {}

  /** True while local limits are in force (since a store failure, until its next answer). */
  get inForce(): boolean {
    return this.failing;
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
    const instances = this.instances();
    if (instances !== this.sharedBy) {
      this.shares = new WeakMap();
      this.sharedBy = instances;
    }
    const local = entries.map(({ rule, entry }) => ({
      rule,
      entry: { ...entry, policy: this.share(entry.policy as Policy, instances) },
    }));
    this.failing = true;
    // No timeout and no breaker: memory answers synchronously underneath. Its sweep timer
    // does not keep the process alive, and expired counts go by themselves.
    if (this.limiter === undefined) {
      this.limiter = new RateLimiter({
        store: new MemoryStore(),
        ...(this.prefix !== undefined && { prefix: this.prefix }),
        circuitBreaker: false,
      });
    }
    this.events.throttled(RATE_LIMIT_EVENTS.insurance, route, {
      route,
      instances: instances ?? 'unknown',
      policies: local.map(({ entry }) => `${entry.policy.name}=${(entry.policy as Policy).limit}`),
    });
    const decision = await this.limiter.consumeEach(local.map((e) => e.entry));
    return { decision, local };
  }

  /** Stops the local store's sweep timer and drops its counts (at shutdown). */
  close(): void {
    const limiter = this.limiter;
    this.limiter = undefined;
    if (limiter === undefined) return;
    limiter.close();
    void limiter.store.close?.();
  }

  /** The store answered: local limits end; their counts stay until their period ends. */
  storeAnswered(): void {
    this.failing = false;
  }

  private share(policy: Policy, instances: number | undefined): Policy {
    let scaled = this.shares.get(policy);
    if (scaled === undefined) {
      const part = (n: number) =>
        instances === undefined ? 1 : Math.max(1, Math.ceil(n / instances));
      scaled = { ...policy, limit: part(policy.limit), capacity: part(policy.capacity) };
      this.shares.set(policy, scaled);
    }
    return scaled;
  }
}
