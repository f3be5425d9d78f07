import type { Cluster, Redis } from 'ioredis';

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * An ioredis client: `Redis` (standalone, or Sentinel through its options) or `Cluster`.
   * The store never closes it. Configure it never to re-send a command whose reply was
   * lost (`autoResendUnfulfilledCommands: false`; on Cluster also `retryDelayOnFailover: 0`
   * and the same in `redisOptions`), or one request may count twice: the store warns
   * otherwise. To fail fast rather than queue while disconnected, also
   * `enableOfflineQueue: false` and `maxRetriesPerRequest: 0`.
   */
  client: Redis | Cluster;
  /**
   * `true` acknowledges a `client` configured to re-send unfulfilled commands, which may
   * count one request twice when a reply is lost with its connection: the store then emits
   * no `NRL_UNSAFE_REDIS_CLIENT` warning for it. For a client shared with code that needs
   * those settings, or a test that means to use one. Default `false`: the store warns, once
   * per client.
   */
  acceptReplays?: boolean;
  /**
   * **Tests only.** Replaces the Redis server clock with this one, in ms since the
   * epoch. In production every instance must share the Redis clock, so leave it unset.
   */
  clock?: () => number;
  /**
   * How often, in **ms**, the store reads the index of controlled identities (those with an
   * override or exemption), so that requests of every other identity skip reading a control
   * hash (about 1 µs of Redis CPU each). An override or exemption set through another
   * instance takes effect here within this long plus one round trip; one set through this
   * store, on its next decision. Until the index has been read once (and while Redis cannot
   * be read at first), every request reads its control hash. `0` or `false`: no index, every
   * request reads its control hash (exact, at that cost). Default 1000; an integer up to 2^31-1.
   */
  controlRefreshMs?: number | false;
  /**
   * How long a request waits, in **ms**, for a client still making its first connection
   * before its call is sent (its `timeoutMs` starts then); past it the call fails as
   * unreachable, unsent. A client that lost its connection is not waited for. Default 1000.
   */
  connectTimeoutMs?: number;
}
