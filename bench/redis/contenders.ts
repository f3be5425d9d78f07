/**
 * The limiters compared at the store level, each deciding for one identity per call, on
 * the same Redis and the same kind of ioredis client.
 */
import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import { Redis } from 'ioredis';
import { RateLimiter, RedisStore, type PolicyInput } from 'nest-rate-limit';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { FLOOR_LUA, floorCall } from '../floor.js';

// The script is internal to the package: read it from the built files the package links to
// (the CommonJS build, which the ESM entry re-exports).
const { CONSUME_SCRIPT } = (await import(
  new URL('../cjs/core/stores/redis-script.js', import.meta.resolve('nest-rate-limit')).href
)) as { CONSUME_SCRIPT: string };

export interface Contender {
  readonly name: string;
  /** What it runs, for the tables. */
  readonly what: string;
  /** One decision for `identity`: true when admitted. */
  decide(identity: string): Promise<boolean>;
  /** The command its decisions show up as in `INFO commandstats`. */
  readonly command: 'evalsha' | 'eval';
  /** The Lua it runs and the arguments of one call, for redis-benchmark (keys first). */
  readonly script: { lua: string; keys: string[]; args: (string | number)[] };
}

/** A budget per identity: `limit` per `periodS` seconds. */
export interface Budget {
  readonly limit: number;
  readonly periodS: number;
  /** Add `nrl-gcra+denyCache`: this package with its deny cache (the hot-key part). */
  readonly withDenyCache?: boolean;
}

/**
 * A budget the throughput parts never exhaust with many identities: 6000 per minute, an
 * emission interval of a whole 10 ms (the common case: no `GET` of a sub-ms credit).
 */
export const BUSY: Budget = { limit: 6000, periodS: 60 };

/** A client tuned as the module tunes its own (and as fast for the peers). */
export function newClient(url: string): Redis {
  return new Redis(url, { enableAutoPipelining: true, autoResendUnfulfilledCommands: false });
}

/** Lua-side arguments of our script for one policy (see CONSUME_SCRIPT): capacity = limit, cost 1. */
const code = { 'fixed-window': 1, 'sliding-window': 2, 'token-bucket': 3, gcra: 4 } as const;

function ours(
  client: Redis,
  name: string,
  what: string,
  policies: PolicyInput[],
  lua: (string | number)[],
  denyCache: boolean | { minRetryAfterMs: number } = false,
  controlRefreshMs?: number,
): Contender {
  const limiter = new RateLimiter({
    // The default index of controlled identities: none is listed, so the script args carry
    // positive codes (no control hash read), as the `lua` arguments below.
    store: new RedisStore({ client, controlRefreshMs }),
    denyCache,
    // The default prefix, as most users keep it: policies differ by name or algorithm.
    prefix: 'rl',
    timeoutMs: 5000,
  });
  return {
    name,
    what,
    decide: async (identity) => (await limiter.consume(identity, policies)).allowed,
    command: 'evalsha',
    script: {
      lua: CONSUME_SCRIPT,
      keys: policies.map((_, i) => `${name}:{ip:__rand_int__}:global:p${i}`),
      args: ['c', ...lua],
    },
  };
}

export function contenders(client: Redis, budget: Budget = BUSY): Contender[] {
  const { limit: LIMIT, periodS: PERIOD_S } = budget;
  const rate = `${LIMIT}/${PERIOD_S}s`;
  const periodMs = PERIOD_S * 1000;
  const one = (algorithm: keyof typeof code) => [code[algorithm], LIMIT, periodMs];
  const list: Contender[] = (
    ['gcra', 'token-bucket', 'sliding-window', 'fixed-window'] as const
  ).map((algorithm) =>
    ours(
      client,
      `nrl-${algorithm}`,
      `this package, ${algorithm}`,
      [{ rate, algorithm }],
      one(algorithm),
    ),
  );
  // First, as the baseline of the tables (as `none` is in the HTTP part).
  list.unshift({
    name: 'floor',
    what: 'EVALSHA of an empty script: a round trip that decides nothing',
    decide: async () => {
      await floorCall(client);
      return true;
    },
    command: 'evalsha',
    script: { lua: FLOOR_LUA, keys: [], args: [] },
  });
  // The same GCRA for an identity the index of controlled identities lists (a negative
  // code): the script reads its control hash, as every request did before the index and
  // does with controlRefreshMs: 0. Its store is told the same, so both sides agree.
  list.push({
    ...ours(
      client,
      'nrl-gcra-ctl',
      'this package, gcra, control hash read',
      [{ rate, algorithm: 'gcra' }],
      [-4, LIMIT, periodMs],
      false,
      0,
    ),
  });
  // A fractional emission interval (142.86 ms) takes the GET of the sub-ms credit.
  list.push(
    ours(
      client,
      'nrl-gcra-7ps',
      'this package, gcra at 7/s',
      [{ name: 'per-second', rate: '7/s', algorithm: 'gcra' }],
      [4, 7, 1000],
    ),
  );
  list.push(
    ours(
      client,
      'nrl-stacked',
      'this package, 2 stacked gcra (burst + daily)',
      [
        { name: 'burst', rate, algorithm: 'gcra' },
        { name: 'daily', rate: '1000000/d', algorithm: 'gcra' },
      ],
      [...one('gcra'), 4, 1_000_000, 86_400_000],
    ),
  );

  if (budget.withDenyCache) {
    list.push(
      ours(
        client,
        'nrl-gcra+denyCache',
        // GCRA refuses for one emission interval (10 ms here), below the 1 s default.
        'this package, gcra, denyCache { minRetryAfterMs: 0 }',
        [{ rate, algorithm: 'gcra' }],
        one('gcra'),
        { minRetryAfterMs: 0 },
      ),
    );
  }

  const rlf = new RateLimiterRedis({
    storeClient: client,
    points: LIMIT,
    duration: PERIOD_S,
    keyPrefix: 'rlflx', // its default
  });
  list.push({
    name: 'rlf-redis',
    what: 'rate-limiter-flexible RateLimiterRedis (fixed window)',
    decide: (identity) =>
      rlf.consume(identity).then(
        () => true,
        (rejection: unknown) => {
          if (rejection instanceof Error) throw rejection;
          return false; // a RateLimiterRes: over the limit
        },
      ),
    command: 'evalsha',
    script: {
      lua: (rlf as unknown as { _incrTtlLuaScript: string })._incrTtlLuaScript,
      keys: ['rlflx:ip:__rand_int__'],
      args: [1, PERIOD_S, LIMIT, PERIOD_S],
    },
  });

  const throttler = new ThrottlerStorageRedisService(client);
  list.push({
    name: 'throttler-redis',
    what: '@nestjs/throttler storage of @nest-lab/throttler-storage-redis',
    decide: async (identity) =>
      !(await throttler.increment(identity, periodMs, LIMIT, periodMs, 'default')).isBlocked,
    command: 'eval',
    script: {
      lua: (throttler as unknown as { scriptSrc: string }).scriptSrc,
      keys: ['{ip:__rand_int__:default}:hits', '{ip:__rand_int__:default}:blocked'],
      args: ['default', periodMs, LIMIT, periodMs],
    },
  });
  return list;
}
