/**
 * nest-rate-limit/throttler beyond the throttler's own suite (test/throttler-suite): what the
 * drop-in promises of its own. Every throttler of a request in one atomic call, on memory and
 * Redis; a storage or guard subclass written for @nestjs/throttler keeps working; our
 * `@RateLimit` beside a `@Throttle` in one app; a store that fails admits, logged.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Injectable,
  Module,
  type ExecutionContext,
  type INestApplication,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { RateLimit, RateLimitModule } from '../../lib/index.js';
import {
  RateLimitRedisStorage,
  SkipThrottle,
  Throttle,
  ThrottlerException,
  ThrottlerGuard,
  ThrottlerModule,
  type ThrottlerLimitDetail,
  type ThrottlerModuleOptions,
  type ThrottlerOptions,
  type ThrottlerRequest,
  type ThrottlerStorage,
  type ThrottlerStorageRecord,
} from '../../lib/throttler/index.js';
import { redisUrl } from '../harness/redis.js';
import { uniquePrefix, type Platform } from './support/app.js';

@Controller('cats')
class Cats {
  @Get()
  list() {
    return 'cats';
  }
  @Get('hot')
  @Throttle({ default: { limit: 1, ttl: 60_000 } })
  hot() {
    return 'hot';
  }
  @Get('only-a')
  @SkipThrottle({ b: true })
  onlyA() {
    return 'a';
  }
  @Get('ours')
  @SkipThrottle()
  @RateLimit('2/m', { algorithm: 'fixed-window' })
  ours() {
    return 'ours';
  }
}

const apps: INestApplication[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function start(
  imports: unknown[],
  guard: Type = ThrottlerGuard,
  platform: Platform = 'express',
): Promise<(path: string, headers?: Record<string, string>) => Promise<Response>> {
  @Module({
    imports: imports as never[],
    controllers: [Cats],
    providers: [{ provide: APP_GUARD, useClass: guard }],
  })
  class App {}
  const settings = { logger: false as const, abortOnError: false };
  const app =
    platform === 'fastify'
      ? await NestFactory.create(App, new FastifyAdapter(), settings)
      : await NestFactory.create(App, settings);
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('localhost', '127.0.0.1');
  return (path, headers) => fetch(`${url}${path}`, { headers });
}

async function statuses(
  get: (path: string) => Promise<Response>,
  path: string,
  n: number,
): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await get(path)).status);
  return out;
}

describe.each(['memory', 'redis'] as const)('the drop-in on %s', (store) => {
  const options = (
    throttlers: ThrottlerOptions[],
    more: Exclude<ThrottlerModuleOptions, unknown[]> | object = {},
  ): ThrottlerModuleOptions => ({
    throttlers,
    ...more,
    ...(store === 'redis' && {
      storage: new RateLimitRedisStorage(redisUrl(), { prefix: uniquePrefix(), timeoutMs: 2000 }),
    }),
  });

  it('a request refused by one throttler spends nothing from the others (one atomic call, all-or-nothing)', async () => {
    // One budget per tracker and throttler, whatever the route (the throttler's generateKey).
    const generateKey = (_: ExecutionContext, tracker: string, name: string) =>
      `${tracker}-${name}`;
    const get = await start([
      ThrottlerModule.forRoot(
        options(
          [
            { name: 'a', ttl: 60_000, limit: 3 },
            { name: 'b', ttl: 120_000, limit: 1 },
          ],
          { generateKey },
        ),
      ),
    ]);
    expect((await get('/cats')).headers.get('x-ratelimit-remaining-a')).toBe('2');
    const refused = await get('/cats');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after-b')).toMatch(/^\d+$/);
    expect(await refused.json()).toEqual({
      statusCode: 429,
      message: 'ThrottlerException: Too Many Requests',
    });
    // `a` admitted the refused request but spent nothing on it (the throttler, which checks
    // one throttler after the other, would have: 0 left here).
    const onlyA = await get('/cats/only-a');
    expect([onlyA.status, onlyA.headers.get('x-ratelimit-remaining-a')]).toEqual([200, '1']);
  });

  it('a limit of 0 refuses every request (6.7.1 admits one as each of its blocks ends)', async () => {
    const get = await start([
      ThrottlerModule.forRoot(
        options([
          { name: 'none', ttl: 60_000, limit: 0 },
          { name: 'some', ttl: 120_000, limit: 5 },
        ]),
      ),
    ]);
    const refused = await get('/cats');
    expect([refused.status, refused.headers.get('retry-after-none')]).toEqual([429, '60']);
    expect(await statuses(get, '/cats', 5)).toEqual(new Array(5).fill(429));
  });

  it('our @RateLimit beside a @Throttle in one app: each guard reads its own decorators', async () => {
    const get = await start([
      ThrottlerModule.forRoot(options([{ ttl: 60_000, limit: 5 }])),
      RateLimitModule.forRoot({
        store: store === 'memory' ? 'memory' : undefined,
        ...(store === 'redis' && { redis: redisUrl(), prefix: uniquePrefix() }),
      }),
    ]);
    expect(await statuses(get, '/cats/hot', 2)).toEqual([200, 429]);
    const ours = await statuses(get, '/cats/ours', 3);
    expect(ours).toEqual([200, 200, 429]);
    expect((await get('/cats/ours')).headers.get('x-ratelimit-limit')).toBe('2');
  });
});

describe('code written for @nestjs/throttler keeps working', () => {
  it('a ThrottlerStorage of your own is asked once per throttler, with ttl and blockDuration in ms', async () => {
    const calls: unknown[][] = [];
    class CountingStorage implements ThrottlerStorage {
      private hits = new Map<string, number>();
      async increment(
        key: string,
        ttl: number,
        limit: number,
        blockDuration: number,
        name: string,
      ): Promise<ThrottlerStorageRecord> {
        calls.push([ttl, limit, blockDuration, name]);
        const totalHits = (this.hits.get(key) ?? 0) + 1;
        this.hits.set(key, totalHits);
        const isBlocked = totalHits > limit;
        return { totalHits, timeToExpire: 60, isBlocked, timeToBlockExpire: isBlocked ? 60 : 0 };
      }
    }
    const get = await start([
      ThrottlerModule.forRoot({
        throttlers: [
          { name: 'long', ttl: 120_000, limit: 5 },
          { ttl: 60_000, limit: 1, blockDuration: 5000 },
        ],
        storage: new CountingStorage(),
      }),
    ]);
    expect(await statuses(get, '/cats', 2)).toEqual([200, 429]);
    expect(calls.slice(0, 2)).toEqual([
      [60_000, 1, 5000, 'default'],
      [120_000, 5, 120_000, 'long'],
    ]);
  });

  it.each(['express', 'fastify'] as const)(
    'a guard subclass (getTracker, throwThrottlingException) on %s',
    async (platform) => {
      @Injectable()
      class ApiKeyGuard extends ThrottlerGuard {
        protected override async getTracker(req: Record<string, string[]>): Promise<string> {
          return (req.headers as unknown as Record<string, string>)['x-api-key'] ?? 'anonymous';
        }
        protected override async throwThrottlingException(
          _context: ExecutionContext,
          detail: ThrottlerLimitDetail,
        ): Promise<void> {
          throw new ThrottlerException(`${detail.tracker}: ${detail.totalHits}/${detail.limit}`);
        }
      }
      const get = await start(
        [ThrottlerModule.forRoot([{ ttl: 60_000, limit: 1 }])],
        ApiKeyGuard,
        platform,
      );
      expect((await get('/cats', { 'x-api-key': 'a' })).status).toBe(200);
      const refused = await get('/cats', { 'x-api-key': 'a' });
      expect(await refused.json()).toMatchObject({ statusCode: 429, message: 'a: 2/1' });
      expect((await get('/cats', { 'x-api-key': 'b' })).status).toBe(200);
    },
  );

  it("a subclass that overrides handleRequest (the throttler README's WebSocket guard) counts through storageService.increment", async () => {
    const seen: string[] = [];
    @Injectable()
    class OwnFlowGuard extends ThrottlerGuard {
      protected override async handleRequest(request: ThrottlerRequest): Promise<boolean> {
        const { context, limit, ttl, throttler, blockDuration, generateKey } = request;
        const key = generateKey(context, 'fixed-tracker', throttler.name!);
        const record = await this.storageService.increment(
          key,
          ttl,
          limit,
          blockDuration,
          throttler.name!,
        );
        seen.push(`${throttler.name}:${record.totalHits}`);
        if (record.isBlocked) {
          await this.throwThrottlingException(context, {
            ...record,
            limit,
            ttl,
            key,
            tracker: 'fixed-tracker',
          });
        }
        return true;
      }
    }
    const get = await start([ThrottlerModule.forRoot([{ ttl: 60_000, limit: 2 }])], OwnFlowGuard);
    expect(await statuses(get, '/cats', 3)).toEqual([200, 200, 429]);
    expect(seen).toEqual(['default:1', 'default:2', 'default:3']);
  });

  it('forRootAsync with a factory; setHeaders: false writes no header; ignoreUserAgents skips counting', async () => {
    const get = await start([
      ThrottlerModule.forRootAsync({
        useFactory: async () => ({
          throttlers: [{ ttl: 60_000, limit: 1 }],
          setHeaders: false,
          ignoreUserAgents: [/bot/],
        }),
      }),
    ]);
    expect(await statuses(get, '/cats', 1)).toEqual([200]);
    const bot = await get('/cats', { 'user-agent': 'crawlbot/1' });
    expect(bot.status).toBe(200);
    const refused = await get('/cats');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBeNull();
    expect(refused.headers.get('x-ratelimit-limit')).toBeNull();
  });
});

describe('when Redis fails', () => {
  it('an unreachable Redis: requests are admitted (fail-open), and the failure is logged', async () => {
    const warnings: string[] = [];
    @Injectable()
    class Watched extends ThrottlerGuard {
      constructor(...args: ConstructorParameters<typeof ThrottlerGuard>) {
        super(...args);
        this.logger = { warn: (m: string) => warnings.push(m) } as never;
      }
    }
    const get = await start(
      [
        ThrottlerModule.forRoot({
          throttlers: [{ ttl: 60_000, limit: 1 }],
          storage: new RateLimitRedisStorage(
            // Nothing listens on port 1. ioredis waits `disconnectTimeout` (2 s) for a
            // connection attempt in flight at shutdown: shortened, so Jest exits at once.
            { host: '127.0.0.1', port: 1, disconnectTimeout: 50 },
            { timeoutMs: 200 },
          ),
        }),
      ],
      Watched,
    );
    expect(await statuses(get, '/cats', 3)).toEqual([200, 200, 200]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^rate_limit\.backend_error \{/);
    // The line names its heading in the error reference; `: admitted` still ends it.
    expect(warnings[0]).toMatch(
      /,"docs":"docs\/reference\/errors\.md#rate_limitbackend_error"\}: admitted$/,
    );
  });
});
