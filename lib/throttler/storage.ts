/** What a storage answers for one hit. */
export interface ThrottlerStorageRecord {
  /** Hits counted in the window, this one included (`limit + 1` when refused). */
  totalHits: number;
  /** **Seconds** until the window ends. */
  timeToExpire: number;
  /** Whether the hit is refused. */
  isBlocked: boolean;
  /** **Seconds** until a refused tracker is admitted again; 0 when admitted. */
  timeToBlockExpire: number;
}

/**
 * Where a throttler counts hits: the throttler's storage interface, unchanged, so a storage
 * written for `@nestjs/throttler` keeps working. The guard asks such a storage once per
 * throttler, one after the other, as the throttler does: nothing makes that atomic (two
 * processes may both read a count under the limit). The storages of this package
 * ({@link ThrottlerStorageService} in memory, {@link RateLimitRedisStorage}) are also asked
 * for every throttler of a request at once, in one atomic call.
 */
export interface ThrottlerStorage {
  /**
   * Counts one hit of `key` under `throttlerName`.
   * @param ttl the window, in **ms**
   * @param limit hits admitted per window
   * @param blockDuration how long, in **ms**, a tracker over the limit is refused; 0 = none
   */
  increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord>;
}

/** The injection token of the storage (`getStorageToken()`, `@InjectThrottlerStorage()`). */
export const ThrottlerStorage = Symbol('ThrottlerStorage');
