import { quote, RateLimitConfigError } from '../core/errors.js';
import { Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { RateLimiter } from '../core/limiter.js';
import { RedisStore } from '../core/stores/redis/redis-store.js';
import { connect, isClient } from '../nest/module/redis-connection.js';
import { EngineStorage } from './engine-storage.js';

/** Longest wait for the first connection when the module starts, in **ms**. */
const CONNECT_WAIT_MS = 1000;

/** Options of {@link RateLimitRedisStorage}. */
export interface RateLimitRedisStorageOptions {
  /** First part of every key. Default `'throttler'`. */
  prefix?: string;
  /**
   * Longest wait for Redis per request, in **ms** (default 100): past it, or while Redis is
   * down, the guard admits the request and logs `rate_limit.backend_error` (fail-open).
   */
  timeoutMs?: number;
}

/**
 * Counts in Redis, shared by every process on the same Redis (standalone, Sentinel or
 * Cluster), so a flood never gets more than `limit` requests through a throttler (the
 * storages of other packages read, then write: nestjs/throttler#1303). On a standalone or
 * Sentinel Redis every throttler of a request is decided in one atomic Lua call. On Cluster
 * it is one Lua call per hash slot, one after the other: the default `generateKey` puts each
 * named throttler's budget key in a slot of its own, so each throttler is atomic and a
 * refusal in a later slot gives back what the earlier ones spent, but two requests may
 * interleave between slots.
 *
 * ```ts
 * ThrottlerModule.forRoot({
 *   throttlers: [{ ttl: 60_000, limit: 10 }],
 *   storage: new RateLimitRedisStorage(process.env.REDIS_URL!),
 * });
 * ```
 *
 * `redis` is a URL or ioredis options (the storage connects when the module starts and
 * disconnects on shutdown), or an ioredis `Redis` or `Cluster` client of yours (never closed
 * by the storage). Needs `ioredis` installed.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_OPTION` when `redis` is none of these
 *   (undefined: an environment variable that is not set)
 */
export class RateLimitRedisStorage
  extends EngineStorage
  implements OnModuleInit, OnApplicationShutdown
{
  private opened: Promise<RateLimiter> | undefined;
  private own: Redis | undefined;

  constructor(
    private readonly redis: string | RedisOptions | Redis | Cluster,
    private readonly options: RateLimitRedisStorageOptions = {},
  ) {
    super();
    // `new RateLimitRedisStorage(process.env.REDIS_URL!)` with the variable unset: say so here,
    // not as a TypeError from the first Redis call at bootstrap.
    if (
      redis === null ||
      (typeof redis !== 'string' && typeof redis !== 'object') ||
      redis === ''
    ) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_STORE_OPTION',
        `invalid redis ${quote(redis)}: expected a Redis URL, ioredis options, or a Redis or Cluster client (an unset environment variable?)`,
        'RateLimitRedisStorage',
      );
    }
  }

  /** Connects (a URL or options) when the module starts, not on a request. */
  async onModuleInit(): Promise<void> {
    await this.limiter();
  }

  protected limiter(): Promise<RateLimiter> {
    this.opened ??= this.open();
    return this.opened;
  }

  private async open(): Promise<RateLimiter> {
    let client: Redis | Cluster;
    if (isClient(this.redis)) {
      client = this.redis;
    } else {
      // Tuned and connected as the module's own client: up to a second, so an app does not
      // wait on a Redis that is not there (requests are then admitted, logged, until it is).
      this.own = await connect(this.redis, CONNECT_WAIT_MS, new Logger(RateLimitRedisStorage.name));
      client = this.own;
    }
    return new RateLimiter({
      store: new RedisStore({ client }),
      prefix: this.options.prefix ?? 'throttler',
      ...(this.options.timeoutMs !== undefined && { timeoutMs: this.options.timeoutMs }),
    });
  }

  /** Closes the connection this storage opened (never a client passed in). */
  async onApplicationShutdown(): Promise<void> {
    const opened = this.opened;
    if (!opened) return;
    const limiter = await opened;
    limiter.close();
    await limiter.store.close?.();
    if (this.own) {
      this.own.disconnect();
      this.own = undefined;
    }
    this.opened = undefined;
  }
}
