/**
 * Validation (issue 3, build point 6; acceptance "bad decorator arguments fail at definition
 * time with a message that names the route"): bad decorator arguments throw when the class
 * is defined, bad module options when the app boots.
 */
import 'reflect-metadata';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, type Type } from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  byTier,
  RateLimit,
  RateLimitConfigError,
  type Algorithm,
  type RateLimitModuleOptions,
} from '../../lib/index.js';
import { disconnect, newRedis, redisUrl } from '../harness/redis.js';
import { bootstrap, PLATFORMS, rootModule, uniquePrefix } from './support/app.js';
import { thrown } from '../support/thrown.js';

/** What `fn` threw. */

describe('bad @RateLimit arguments fail when the class is defined, naming the route', () => {
  it.each([
    ['a zero rate', '0/m', {}, 'ERR_RATE_LIMIT_RATE', /invalid rate "0\/m"/],
    ['a malformed rate', '5 per minute', {}, 'ERR_RATE_LIMIT_RATE', /"5 per minute"/],
    [
      'an unknown algorithm',
      '5/m',
      { algorithm: 'nope' as Algorithm },
      'ERR_RATE_LIMIT_ALGORITHM',
      /"nope"/,
    ],
    ['burst 0', '5/m', { burst: 0 }, 'ERR_RATE_LIMIT_BURST', /burst 0/],
    [
      'burst on a window algorithm',
      '5/m',
      { algorithm: 'fixed-window' as Algorithm, burst: 5 },
      'ERR_RATE_LIMIT_BURST',
      /burst 5/,
    ],
    ['cost -1', '5/m', { cost: -1 }, 'ERR_RATE_LIMIT_COST', /cost -1/],
    [
      'addressBurst 0',
      '5/m',
      { addressBurst: 0 },
      'ERR_RATE_LIMIT_POLICY_OPTION',
      /addressBurst 0/,
    ],
    ['a cost above the capacity', '5/m', { cost: 6 }, 'ERR_RATE_LIMIT_COST', /cost 6/],
    ["scope 'a:b'", '5/m', { scope: 'a:b' }, 'ERR_RATE_LIMIT_SCOPE', /scope "a:b"/],
    ['a bad name', '5/m', { name: 'two words' }, 'ERR_RATE_LIMIT_NAME', /"two words"/],
  ] as const)('%s on a handler', (_label, rate, options, code, detail) => {
    const define = () => {
      class C {
        @RateLimit(rate, options)
        h() {}
      }
      return C;
    };
    expect(define).toThrow(/\(in C\.h\)/);
    expect(define).toThrow(detail);
    const error = thrown(define);
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect((error as RateLimitConfigError).code).toBe(code);
    expect((error as RateLimitConfigError).where).toBe('C.h');
  });

  it('a bad rate on a class names the class', () => {
    expect(() => {
      @RateLimit('5/x')
      class ReportsController {}
      return ReportsController;
    }).toThrow(/invalid rate "5\/x".*\(in ReportsController\)/);
  });

  it('a rate function still has its other options checked at definition', () => {
    expect(() => {
      class C {
        @RateLimit(() => '5/m', { burst: 0 })
        h() {}
      }
      return C;
    }).toThrow(/burst 0.*\(in C\.h\)/);
  });

  it('two stacked policies with one name fail at definition', () => {
    expect(() => {
      class C {
        @RateLimit('5/m')
        @RateLimit('10/m')
        h() {}
      }
      return C;
    }).toThrow(/two @RateLimit named "default".*\(in C\.h\)/);
  });

  it('byTier checks its rates and its fallback at definition', () => {
    expect(() => byTier({ free: '0/m' }, () => 'free', { fallback: 'free' })).toThrow(
      /invalid rate "0\/m"/,
    );
    expect(() => byTier({ free: '1/m' }, () => 'free', { fallback: 'gold' })).toThrow(
      /fallback "gold" is not one of the tiers/,
    );
  });
});

// A policy that is only wrong together with the module options fails at bootstrap.
@Controller('conflict')
class ConflictController {
  @Get()
  @RateLimit('5/m', { burst: 10 })
  bursty() {
    return 'ok';
  }
}

@Controller('fine')
class FineController {
  @Get()
  @RateLimit('5/m')
  fine() {
    return 'ok';
  }
}

/**
 * Redis options for an app that is expected to fail at bootstrap. A failed bootstrap leaks
 * the client the module created (see the failing test below), so each such client gets a
 * connection name to find it by and no reconnects, and is killed from the server side after
 * the test; otherwise its open connection would keep the Jest worker alive.
 */
function leakableRedis(name: string) {
  const { hostname, port } = new URL(redisUrl());
  return { host: hostname, port: Number(port), connectionName: name, retryStrategy: () => null };
}

let admin: Redis;
beforeAll(() => {
  admin = newRedis();
});
afterAll(() => disconnect(admin));

/** Ids of the connections whose name starts with `name` on the shared Redis. */
async function connectionsNamed(name: string): Promise<string[]> {
  const list = String(await admin.call('CLIENT', 'LIST'));
  return list
    .split('\n')
    .filter((line) => line.includes(` name=${name}`))
    .map((line) => /\bid=(\d+)/.exec(line)![1]!);
}

async function killConnectionsNamed(name: string): Promise<void> {
  for (const id of await connectionsNamed(name)) await admin.call('CLIENT', 'KILL', 'ID', id);
}

describe.each(PLATFORMS)('bad module options fail at bootstrap on %s', (platform) => {
  const name = `boot${uniquePrefix()}`;
  afterEach(() => killConnectionsNamed(name));

  const boot = (options: RateLimitModuleOptions, controllers: Type[] = [FineController]) =>
    bootstrap(
      platform,
      rootModule({ redis: leakableRedis(name), prefix: uniquePrefix(), ...options }, controllers),
    );

  it.each([
    ['timeoutMs: 0', { timeoutMs: 0 }, /invalid timeoutMs 0/],
    ["algorithm: 'nope'", { algorithm: 'nope' as Algorithm }, /unknown algorithm "nope"/],
    ["default: '0/m'", { default: '0/m' }, /invalid rate "0\/m".*RateLimitModule default/],
    ['trustedProxies: -1', { trustedProxies: -1 }, /invalid trustedProxies -1/],
    ['ipv6Subnet: 0', { ipv6Subnet: 0 }, /invalid ipv6Subnet 0/],
    ['controlRefreshMs: -1', { controlRefreshMs: -1 }, /invalid controlRefreshMs -1/],
    ['controlRefreshMs: 2.5', { controlRefreshMs: 2.5 }, /invalid controlRefreshMs 2\.5/],
    ["prefix: 'a b'", { prefix: 'a b' }, /invalid prefix "a b"/],
    ['addressBurst: 2.5', { addressBurst: 2.5 }, /invalid addressBurst 2\.5.*RateLimitModule/],
    [
      'circuitBreaker.cooldownMs: 0',
      { circuitBreaker: { cooldownMs: 0 } },
      /circuitBreaker\.cooldownMs 0/,
    ],
    // Regression (review): checked only once the Redis client existed, which it then leaked.
    ['denyCache.maxAgeMs: 0', { denyCache: { maxAgeMs: 0 } }, /invalid denyCache\.maxAgeMs 0/],
    ["enabled: 'yes'", { enabled: 'yes' as unknown as boolean }, /invalid enabled "yes"/],
    ['default: []', { default: [] }, /invalid default \[\].*RateLimitModule default/],
    [
      "headers.standard: 'draft-9' (not one the server sends)",
      { headers: { standard: 'draft-9' as 'draft-10' } },
      /invalid headers \{"standard":"draft-9"\}: expected .*'draft-6' \| 'draft-7' \| 'draft-8' \| 'draft-10' \| 'draft-11' \| false/,
    ],
    [
      'default: two policies named "short"',
      {
        default: [
          { name: 'short', rate: '3/s' },
          { name: 'short', rate: '9/m' },
        ],
      },
      /two default policies named "short".*RateLimitModule default\[1\]/,
    ],
    [
      'default: a bad rate in the list',
      {
        default: [
          { name: 'short', rate: '3/s' },
          { name: 'long', rate: '9/x' },
        ],
      },
      /invalid rate "9\/x".*RateLimitModule default\[1\]/,
    ],
  ] as const)(
    '%s rejects NestFactory.create, naming the option',
    async (_label, options, message) => {
      const failed = boot(options);
      await expect(failed).rejects.toThrow(message);
      await expect(failed).rejects.toBeInstanceOf(RateLimitConfigError);
    },
  );

  // Route policies are resolved in an onModuleInit hook, so NestFactory.create resolves and
  // app.init() (or listen()) rejects.
  it("a route's burst conflicting with the module algorithm fails at init, naming the route", async () => {
    const app = await boot({ algorithm: 'fixed-window' }, [ConflictController]);
    try {
      await expect(app.init()).rejects.toThrow(/burst 10.*\(in ConflictController\.bursty\)/);
    } finally {
      await app.close().catch(() => undefined);
    }
  });

  // Regression: options checked after the module created its Redis client (timeoutMs, prefix,
  // circuitBreaker, default) made NestFactory.create reject with that client still
  // connected, reconnecting forever and keeping the process alive.
  // Input: RateLimitModule.forRoot({ redis: 'redis://127.0.0.1:6379', timeoutMs: 0 }).
  it('a failed bootstrap closes the Redis client the module created', async () => {
    const leak = `${name}leak`;
    await expect(
      bootstrap(
        platform,
        rootModule({ redis: leakableRedis(leak), timeoutMs: 0 }, [FineController]),
      ),
    ).rejects.toThrow(/timeoutMs/);
    // Bounded poll: give a client closed asynchronously up to 300 ms to go.
    let open = await connectionsNamed(leak);
    for (let i = 0; i < 12 && open.length > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      open = await connectionsNamed(leak);
    }
    expect(open).toEqual([]);
  });
});
