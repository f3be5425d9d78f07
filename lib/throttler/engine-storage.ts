import { createHash } from 'node:crypto';
import type { LimitEntry, RateLimiter } from '../core/limiter.js';
import { definePolicy } from '../core/limiter.js';
import { MAX_LOG_ENTRIES } from '../core/algorithms/sliding-log.js';
import { MAX_FIXED_WINDOW_PERIOD_MS, MAX_SCALED } from '../core/model/rate.js';
import type { Policy, PolicyDecision } from '../core/model/policy.js';
import { Logger } from '@nestjs/common';
import { guardReport, storedBlock } from './block-default.js';
import { ThrottlerFailures } from './failures.js';
import type { ThrottlerStorage, ThrottlerStorageRecord } from './storage.js';

/** Where `increment` logs a store failure it admits (the guard's name: one source to grep). */
const LOGGER = new Logger('ThrottlerGuard');

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

/**
 * Every key of this storage: `<prefix>:{<budget key>}:throttler:<name>:sl` (`:fwc` above
 * 10,000 hits; `default` written empty).
 */
const SCOPE = 'throttler';
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
/** Policies kept per storage (one per throttler and route setting): a bounded memo. */
const MEMO_SIZE = 1024;
/**
 * A limit above this (2^50 hits) is no limit: the throttler admits without counting
 * (`limit: Infinity`).
 */
const MAX_LIMIT = 2 ** 50;
/**
 * The longest window and block, in **ms** (2^40, about 34 years): a longer `ttl`
 * (`Infinity`) or `blockDuration` (50 years) is counted as this long.
 */
const MAX_MS = MAX_FIXED_WINDOW_PERIOD_MS;

/**
 * A throttler storage on this package's engine: every throttler of a request is decided in
 * one call of a {@link RateLimiter} (a sliding log per budget key and throttler, a fixed window
 * above its size, with the
 * throttler's block), all-or-nothing: a request refused by one throttler spends nothing from
 * the others. In memory and on a standalone or Sentinel Redis that call is one atomic step
 * (one Lua script). On Redis Cluster it is one script per hash slot, one slot after the
 * other (see `RateLimiter.consumeEach`): each budget key is its own slot (the default
 * `generateKey` hashes the throttler's name in, so each named throttler usually lands in a
 * slot of its own); each slot's throttlers are atomic, and a refusal in a later slot gives
 * back what the earlier slots spent, but two requests may interleave between slots.
 *
 * Settings past the engine's bounds still work: a `limit` above 2^50 (`Infinity`) is no
 * limit; a `ttl` or `blockDuration` above 2^40 ms (`Infinity`, 50 years) counts as 2^40 ms;
 * a `ttl` below 1 ms as 1 ms; a negative `blockDuration` as none.
 */
export abstract class EngineStorage implements ThrottlerStorage {
  private readonly policies = new Map<string, Policy>();
  private readonly failures = new ThrottlerFailures(() => LOGGER);
  private readonly admits = (error: unknown) => this.failures.admits(error);

  /** The engine this storage counts with (opened on first use when it needs connecting). */
  protected abstract limiter(): RateLimiter | Promise<RateLimiter>;

  /**
   * One hit, alone in its store call (for guards that ask throttler by throttler, and
   * `handleRequest` overrides that call it themselves). Fails open on its own: when the store
   * fails or times out, the hit is admitted (`totalHits: 0`, nothing counted) and
   * `rate_limit.backend_error` logged at most once per 10 s (by the drop-in guard's logger
   * when its `handleRequest` asks). A `blockDuration` that is the
   * default of a throttler setting none, handed over by a `handleRequest` of the drop-in's
   * guard, counts as no block (refused until the window ends, nestjs/throttler#2208).
   * @param ttl the window, in **ms**
   * @param blockDuration **ms**; 0 = none
   */
  async increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    const block = storedBlock(throttlerName, blockDuration);
    try {
      const [record] = await this.decide([
        { key, ttl, limit, blockDuration: block, throttlerName },
      ]);
      return record!;
    } catch (error) {
      if (!(guardReport() ?? this.admits)(error)) throw error;
      return { totalHits: 0, timeToExpire: 0, isBlocked: false, timeToBlockExpire: 0 };
    }
  }

  /**
   * Every hit of one request in one store call: admitted only if every throttler admits.
   * One record per hit, in order. A key that is not a string (`getTracker: () => 42`) is
   * counted as its string. Two hits of one budget (key and throttler name: two throttlers
   * without a name are both `'default'`) count on one shared count, each hit adding one
   * and checking its own limit, as the throttler's storage does.
   * @throws {RateLimitBackendError} when the store fails or exceeds its timeout
   */
  async decide(hits: readonly ThrottlerHit[]): Promise<ThrottlerStorageRecord[]> {
    const shares = sharesOf(hits);
    // A limit below 1 admits nothing (as the throttler's): the request is refused, and the
    // other throttlers are read, not spent. A limit above 2^50 is none: nothing to count.
    const counted = (hit: ThrottlerHit) => hit.limit >= 1 && hit.limit <= MAX_LIMIT;
    const refused = hits.some((hit) => !(hit.limit >= 1));
    const entries: LimitEntry[] = [];
    hits.forEach((hit, i) => {
      if (!counted(hit)) return;
      const { n, j } = shares[i]!;
      entries.push({
        identity: String(hit.key),
        policy: this.policyOf(hit, n, j),
        scope: SCOPE,
        ...(n > 1 && { cost: refused ? 0 : n }),
      });
    });
    const limiter = await this.limiter();
    const decided = entries.length
      ? (await limiter.consumeEach(entries, refused ? { cost: 0 } : {})).policies
      : [];
    let k = 0;
    return hits.map((hit) => {
      const ttlSeconds = Math.ceil(windowMs(hit.ttl) / 1000);
      if (counted(hit)) return recordOf(decided[k++]!, hit);
      if (hit.limit >= 1) {
        return { totalHits: 1, timeToExpire: ttlSeconds, isBlocked: false, timeToBlockExpire: 0 };
      }
      return {
        totalHits: 1,
        timeToExpire: ttlSeconds,
        isBlocked: true,
        timeToBlockExpire: Math.ceil(Math.min(MAX_MS, hit.blockDuration || hit.ttl) / 1000),
      };
    });
  }

  /**
   * The sliding log (or fixed window) of one hit; the `j`-th of `n` hits of one budget counts
   * on a log of its own with cost `n` and `n - j` more room, so that it admits exactly when the shared
   * count (each earlier hit of the request counted) stays within its limit.
   */
  private policyOf(hit: ThrottlerHit, n: number, j: number): Policy {
    const ttl = windowMs(hit.ttl);
    const limit = Math.floor(hit.limit) + n - j;
    const block = Math.min(MAX_MS, Math.max(0, Math.ceil(hit.blockDuration || 0)));
    const memo = `${hit.throttlerName}\0${limit}\0${ttl}\0${block}\0${j}`;
    let policy = this.policies.get(memo);
    if (policy === undefined) {
      const name = j > 1 ? `${hit.throttlerName}\0${j}` : hit.throttlerName;
      policy = definePolicy(
        {
          name: NAME.test(name) ? name : hashedName(name),
          rate: { limit, periodMs: ttl },
          // The throttler's storage is a sliding log (each hit expires `ttl` after it); a
          // limit too large for a log (or a rate too large to count) a fixed window.
          algorithm:
            limit <= MAX_LOG_ENTRIES && limit * ttl <= MAX_SCALED ? 'sliding-log' : 'fixed-window',
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

/** A `ttl` as a window the engine counts, in **ms**: 1 to 2^40, whole. */
function windowMs(ttl: number): number {
  return Math.min(MAX_MS, Math.max(1, Math.ceil(ttl)));
}

/**
 * For each hit, how many hits of the request share its budget (key and throttler name), `n`,
 * and its place among them, `j` (from 1).
 */
function sharesOf(hits: readonly ThrottlerHit[]): { n: number; j: number }[] {
  if (hits.length < 2) return hits.map(() => ({ n: 1, j: 1 }));
  const seen = new Map<string, { n: number }>();
  const shares = hits.map((hit) => {
    const budget = `${String(hit.key)}\0${hit.throttlerName}`;
    let group = seen.get(budget);
    if (!group) seen.set(budget, (group = { n: 0 }));
    group.n++;
    return { group, j: group.n };
  });
  return shares.map(({ group, j }) => ({ n: group.n, j }));
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
      // The shared count as this hit saw it (the request's later hits not yet counted).
      totalHits: Math.floor(hit.limit) - p.remaining,
      timeToExpire,
      isBlocked: false,
      timeToBlockExpire: 0,
    };
  }
  // A cost the window can never hold (a shared budget under its share) waits a window.
  const retryAfterMs = Number.isFinite(p.retryAfterMs) ? p.retryAfterMs : windowMs(hit.ttl);
  return {
    // The throttler counts the refused hit too.
    totalHits: hit.limit + 1,
    timeToExpire,
    isBlocked: true,
    timeToBlockExpire: Math.ceil(retryAfterMs / 1000),
  };
}
