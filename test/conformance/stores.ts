import type { Cluster, Redis } from 'ioredis';
import { MemoryStore, RedisStore, type RateLimitStore } from '../../lib/index.js';
import { newCluster, newRedis } from '../harness/redis.js';

/** A store under test, driven by an injected clock, with a way to read a key's TTL. */
export interface StoreFixture {
  readonly store: RateLimitStore;
  /** Redis `PTTL` semantics: ms left, -1 for a key without TTL, -2 for no key. */
  pttl(key: string): Promise<number>;
  /** The stored value of a key, in some form that changes whenever the state does. */
  raw(key: string): Promise<string | undefined>;
}

/** Builds fixtures of one kind of store; `close` releases its connection. */
export interface StoreKind {
  readonly name: string;
  /**
   * The store expires keys on its own real clock (Redis), not on the injected one: a key
   * written with a TTL of t ms may be gone t ms of real time later, however still the test
   * clock stands. MemoryStore expires on the injected clock only.
   */
  readonly expiresInRealTime: boolean;
  make(clock: () => number): StoreFixture;
  close(): Promise<void>;
}

export function memoryKind(): StoreKind {
  return {
    name: 'MemoryStore',
    expiresInRealTime: false,
    make(clock) {
      const store = new MemoryStore({ clock, sweepIntervalMs: 0 });
      return {
        store,
        pttl: (key) => Promise.resolve(store.pttl(key)),
        raw: (key) => Promise.resolve(JSON.stringify(store.state(key))),
      };
    },
    close: () => Promise.resolve(),
  };
}

function redisKind(name: string, client: Redis | Cluster): StoreKind {
  return {
    name,
    expiresInRealTime: true,
    make(clock) {
      return {
        store: new RedisStore({ client, clock }),
        pttl: (key) => client.pttl(key),
        raw: async (key) => (await client.get(key)) ?? undefined,
      };
    },
    close: async () => {
      await client.quit();
    },
  };
}

// Clients that never re-send a script (see RedisStore's replay warning).
export const standaloneKind = (): StoreKind =>
  redisKind('Redis standalone', newRedis({ autoResendUnfulfilledCommands: false }));
export const clusterKind = (): StoreKind =>
  redisKind(
    'Redis Cluster',
    newCluster({ retryDelayOnFailover: 0, redisOptions: { autoResendUnfulfilledCommands: false } }),
  );

/**
 * How much of a TTL written by a call sent at `sentAt` (`performance.now()`, ms) the store may
 * have counted down by now: on a store that expires in real time, the real time since then,
 * rounded up, plus 1 ms for Redis' whole-ms clock (measured, so it holds however loaded the
 * machine); 0 on one that expires on the injected clock.
 */
export function countedDown(kind: StoreKind, sentAt: number): number {
  return kind.expiresInRealTime ? Math.ceil(performance.now() - sentAt) + 1 : 0;
}
