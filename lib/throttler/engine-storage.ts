import { createHash } from 'node:crypto';
import type { LimitEntry, RateLimiter } from '../core/limiter.js';
import { definePolicy } from '../core/limiter.js';
import type { Policy, PolicyDecision } from '../core/policy.js';
import type { ThrottlerStorage, ThrottlerStorageRecord } from './storage.js';

/** One throttler's hit, as the guard hands it to {@link EngineStorage.decide}. */
export interface ThrottlerHit {
  /** The budget's key (`generateKey`'s). */
  readonly key: string;
  /** The window, in **ms**. */
  readonly ttl: number;
  readonly limit: number;
  /** **ms**; 0 = no block. */
  readonly blockDuration: number;
  readonly throttlerName: string;
}

/** Every key of this storage: `<prefix>:{<budget key>}:throttler:<name>:fw`. */
const SCOPE = 'throttler';
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
/** Policies kept per storage (one per throttler and route setting): a bounded memo. */
const MEMO_SIZE = 1024;

/**
 * A throttler storage on this package's engine: every throttler of a request is decided in
 * ONE store call of a {@link RateLimiter} (a fixed window per budget key and throttler, with
 * the throttler's block), atomically and all-or-nothing: a request refused by one throttler
 * spends nothing from the others. On Redis Cluster, budget keys of different slots are
 * decided one slot after the other (see `RateLimiter.consumeEach`).
 */
export abstract class EngineStorage implements ThrottlerStorage {
  private readonly policies = new Map<string, Policy>();

  /** The engine this storage counts with (opened on first use when it needs connecting). */
  protected abstract limiter(): RateLimiter | Promise<RateLimiter>;

  /** One hit, alone in its store call (for guards that ask throttler by throttler). */
  async increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    const [record] = await this.decide([{ key, ttl, limit, blockDuration, throttlerName }]);
    return record!;
  }

  /**
   * Every hit of one request in one atomic store call: admitted only if every throttler
   * admits. One record per hit, in order.
   * @throws {RateLimitBackendError} when the store fails or exceeds its timeout
   */
  async decide(hits: readonly ThrottlerHit[]): Promise<ThrottlerStorageRecord[]> {
    // A limit below 1 admits nothing (as the throttler's): the request is refused, and the
    // other throttlers are read, not spent.
    const possible = hits.filter((hit) => hit.limit >= 1);
    const entries: LimitEntry[] = possible.map((hit) => ({
      identity: hit.key,
      policy: this.policyOf(hit),
      scope: SCOPE,
    }));
    const limiter = await this.limiter();
    const refused = possible.length < hits.length;
    const decided = entries.length
      ? (await limiter.consumeEach(entries, refused ? { cost: 0 } : {})).policies
      : [];
    let k = 0;
    return hits.map((hit) =>
      hit.limit >= 1
        ? recordOf(decided[k++]!, hit)
        : {
            totalHits: 1,
            timeToExpire: Math.ceil(hit.ttl / 1000),
            isBlocked: true,
            timeToBlockExpire: Math.ceil((hit.blockDuration || hit.ttl) / 1000),
          },
    );
  }

  private policyOf(hit: ThrottlerHit): Policy {
    const ttl = Math.max(1, Math.ceil(hit.ttl));
    const limit = Math.floor(hit.limit);
    const block = Math.max(0, Math.ceil(hit.blockDuration));
    const memo = `${hit.throttlerName}\0${limit}\0${ttl}\0${block}`;
    let policy = this.policies.get(memo);
    if (policy === undefined) {
      policy = definePolicy(
        {
          name: NAME.test(hit.throttlerName) ? hit.throttlerName : hashedName(hit.throttlerName),
          rate: { limit, periodMs: ttl },
          algorithm: 'fixed-window',
          ...(block > 0 && { block, blockResets: true }),
        },
        `throttler "${hit.throttlerName}"`,
      );
      if (this.policies.size >= MEMO_SIZE) this.policies.clear();
      this.policies.set(memo, policy);
    }
    return policy;
  }
}

/** A throttler name that cannot be part of a key, as one that can (and differs from every other). */
function hashedName(name: string): string {
  return `h.${createHash('sha256').update(name).digest('base64url').slice(0, 22)}`;
}

/** The throttler's record of one policy's decision: durations in **seconds**, rounded up. */
function recordOf(p: PolicyDecision, hit: ThrottlerHit): ThrottlerStorageRecord {
  const timeToExpire = Math.ceil(p.resetMs / 1000);
  if (p.allowed) {
    return {
      totalHits: hit.limit - p.remaining,
      timeToExpire,
      isBlocked: false,
      timeToBlockExpire: 0,
    };
  }
  return {
    // The throttler counts the refused hit too.
    totalHits: hit.limit + 1,
    timeToExpire,
    isBlocked: true,
    timeToBlockExpire: Math.ceil(p.retryAfterMs / 1000),
  };
}
