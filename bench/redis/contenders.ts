/**
 * The limiters compared at the store level, each deciding for one identity per call, on
 * the same Redis and the same kind of ioredis client.
 */
import { fileURLToPath } from 'node:url';
import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import { Redis } from 'ioredis';
import * as current from 'nest-rate-limit';
import type { PolicyInput } from 'nest-rate-limit';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { consumeScript, type Baseline, type NrlPackage } from '../baseline.js';
import { FLOOR_LUA, floorCall } from '../floor.js';
import { baseTwin, withTwins } from '../twins.js';

// The script is internal to the package: read it from the built files the package links to
// (the CommonJS build, which the ESM entry re-exports).
const CONSUME_SCRIPT = await consumeScript(fileURLToPath(import.meta.resolve('nest-rate-limit')));
if (CONSUME_SCRIPT === undefined) throw new Error('the consume script is not in the build');

export interface Contender {
  readonly name: string;
  /** What it runs, for the tables. */
  readonly what: string;
  /** One decision for `identity`: true when admitted. */
  decide(identity: string): Promise<boolean>;
  /** The command its decisions show up as in `INFO commandstats`. */
  readonly command: 'evalsha' | 'eval';
  /**
   * The Lua it runs and the arguments of one call, for redis-benchmark (keys first); none for
   * an `@base` twin whose build has no script where the bench looks.
   */
  readonly script: { lua: string; keys: string[]; args: (string | number)[] } | undefined;
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

/** The build a contender of ours runs on: the current one, or the baseline's (`@base`). */
interface Build {
  pkg: NrlPackage;
  /** Our script in that build, for redis-benchmark. */
  lua: string | undefined;
  /** Added to the name: '' or '@base'. */
  twin: (name: string) => string;
  /**
   * The key prefix: the default `rl` for the current build, `rb` (as long) for the baseline's,
   * so that twins never read each other's state and their key names weigh the same.
   */
  prefix: string;
  what: string;
}

const CURRENT: Build = {
  pkg: current,
  lua: CONSUME_SCRIPT,
  twin: (name) => name,
  prefix: 'rl',
  what: '',
};

function ours(
  client: Redis,
  build: Build,
  name: string,
  what: string,
  policies: PolicyInput[],
  lua: (string | number)[],
  denyCache: boolean | { minRetryAfterMs: number } = false,
  controlRefreshMs?: number,
): Contender {
  const limiter = new build.pkg.RateLimiter({
    // The default index of controlled identities: none is listed, so the script args carry
    // positive codes (no control hash read), as the `lua` arguments below.
    store: new build.pkg.RedisStore({ client, controlRefreshMs }),
    denyCache,
    // The default prefix, as most users keep it: policies differ by name or algorithm.
    prefix: build.prefix,
    timeoutMs: 5000,
  });
  const full = build.twin(name);
  return {
    name: full,
    what: `${what}${build.what}`,
    decide: async (identity) => (await limiter.consume(identity, policies)).allowed,
    command: 'evalsha',
    script: build.lua
      ? {
          lua: build.lua,
          keys: policies.map((_, i) => `${full}:{ip:__rand_int__}:global:p${i}`),
          args: ['c', ...lua],
        }
      : undefined,
  };
}

/**
 * Every contender, at `budget`; with a `base`, each of ours followed by its `@base` twin on
 * the baseline's build (left out, with a note, when that build cannot make it).
 */
export function contenders(client: Redis, budget: Budget = BUSY, base?: Baseline): Contender[] {
  const baseBuild: Build | undefined = base && {
    pkg: base.pkg,
    lua: base.consumeScript,
    twin: baseTwin,
    prefix: 'rb',
    what: ` (${base.ref})`,
  };
  // One of ours, made on each build; `make` builds it on the one it is given.
  type Make = (build: Build) => Contender;
  const made = new Map<Contender, Make>();
  const both = (make: Make): Contender => {
    const contender = make(CURRENT);
    made.set(contender, make);
    return contender;
  };
  const twinOf = (contender: Contender): Contender | undefined => {
    const make = made.get(contender);
    if (!baseBuild || !make) return undefined;
    try {
      return make(baseBuild);
    } catch (error) {
      base!.note(
        `baseline: ${baseTwin(contender.name)} left out: ${base!.ref}'s build refused it (${error instanceof Error ? error.message : String(error)})`,
      );
      return undefined;
    }
  };
  return withTwins(contendersOf(client, budget, both), (c) => c.name, twinOf);
}

function contendersOf(
  client: Redis,
  budget: Budget,
  both: (make: (build: Build) => Contender) => Contender,
): Contender[] {
  const { limit: LIMIT, periodS: PERIOD_S } = budget;
  const rate = `${LIMIT}/${PERIOD_S}s`;
  const periodMs = PERIOD_S * 1000;
  const one = (algorithm: keyof typeof code) => [code[algorithm], LIMIT, periodMs];
  const list: Contender[] = (
    ['gcra', 'token-bucket', 'sliding-window', 'fixed-window'] as const
  ).map((algorithm) =>
    both((b) =>
      ours(
        client,
        b,
        `nrl-${algorithm}`,
        `this package, ${algorithm}`,
        [{ rate, algorithm }],
        one(algorithm),
      ),
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
  list.push(
    both((b) =>
      ours(
        client,
        b,
        'nrl-gcra-ctl',
        'this package, gcra, control hash read',
        [{ rate, algorithm: 'gcra' }],
        [-4, LIMIT, periodMs],
        false,
        0,
      ),
    ),
  );
  // A fractional emission interval (142.86 ms) takes the GET of the sub-ms credit.
  list.push(
    both((b) =>
      ours(
        client,
        b,
        'nrl-gcra-7ps',
        'this package, gcra at 7/s',
        [{ name: 'per-second', rate: '7/s', algorithm: 'gcra' }],
        [4, 7, 1000],
      ),
    ),
  );
  list.push(
    both((b) =>
      ours(
        client,
        b,
        'nrl-stacked',
        'this package, 2 stacked gcra (burst + daily)',
        [
          { name: 'burst', rate, algorithm: 'gcra' },
          { name: 'daily', rate: '1000000/d', algorithm: 'gcra' },
        ],
        [...one('gcra'), 4, 1_000_000, 86_400_000],
      ),
    ),
  );

  if (budget.withDenyCache) {
    list.push(
      both((b) =>
        ours(
          client,
          b,
          'nrl-gcra+denyCache',
          // GCRA refuses for one emission interval (10 ms here), below the 1 s default.
          'this package, gcra, denyCache { minRetryAfterMs: 0 }',
          [{ rate, algorithm: 'gcra' }],
          one('gcra'),
          { minRetryAfterMs: 0 },
        ),
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
