/**
 * nest-rate-limit/throttler on inputs at the edges (huge, infinite or non-numeric limits, blocks,
 * unnamed throttlers, subclasses), each with the input that once failed, in real apps on memory
 * and Redis. What @nestjs/throttler 6.7.1 answers to the same input (observed side by side) is
 * quoted in each test's name.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Module,
  type ExecutionContext,
  type INestApplication,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import {
  days,
  RateLimitRedisStorage,
  ThrottlerGuard,
  ThrottlerModule,
  ThrottlerStorageService,
  type ThrottlerModuleOptions,
  type ThrottlerOptions,
  type ThrottlerRequest,
} from '../../lib/throttler/index.js';
import { redisUrl } from '../harness/redis.js';
import { uniquePrefix } from './support/app.js';

@Controller()
class Root {
  @Get()
  get() {
    return 'ok';
  }
}

const apps: INestApplication[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

type Get = () => Promise<Response>;

async function start(options: ThrottlerModuleOptions, guard: Type = ThrottlerGuard): Promise<Get> {
  @Module({
    imports: [ThrottlerModule.forRoot(options)],
    controllers: [Root],
    providers: [{ provide: APP_GUARD, useClass: guard }],
  })
  class App {}
  const app = await NestFactory.create(App, { logger: false, abortOnError: false });
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  return () => fetch(url);
}

async function statuses(get: Get, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await get()).status);
  return out;
}

const sleepUntil = (t0: number, at: number) =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, t0 + at - Date.now())));

/** A guard whose warnings are kept (`rate_limit.*` events). */
const warnings: string[] = [];
class LoggedGuard extends ThrottlerGuard {
  protected override logger = { warn: (m: string) => warnings.push(m) } as never;
}

/** A pass-through `handleRequest`, as a subclass often has one. */
class PassThroughGuard extends ThrottlerGuard {
  protected override async handleRequest(request: ThrottlerRequest): Promise<boolean> {
    return super.handleRequest(request);
  }
}

describe.each(['memory', 'redis'] as const)('the drop-in on edge inputs, on %s', (store) => {
  const options = (
    throttlers: ThrottlerOptions[],
    more: Partial<Exclude<ThrottlerModuleOptions, unknown[]>> = {},
  ): ThrottlerModuleOptions => ({
    throttlers,
    ...more,
    ...(store === 'redis' && {
      storage: new RateLimitRedisStorage(redisUrl(), { prefix: uniquePrefix(), timeoutMs: 2000 }),
    }),
  });

  it('1,000,000 per 30 days, limit Infinity, ttl Infinity, a 50-year blockDuration answer as 6.7.1 (200, never 500)', async () => {
    const month = await start(options([{ ttl: days(30), limit: 1_000_000 }]));
    const first = await month();
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-remaining')).toBe('999999');
    expect(first.headers.get('x-ratelimit-reset')).toBe('2592000');
    expect((await month()).headers.get('x-ratelimit-remaining')).toBe('999998');

    const unlimited = await start(options([{ ttl: 60_000, limit: Infinity }]));
    expect(await statuses(unlimited, 3)).toEqual([200, 200, 200]);
    expect((await unlimited()).headers.get('x-ratelimit-remaining')).toBe('Infinity');

    const forever = await start(options([{ ttl: Infinity, limit: 5 }]));
    const r = await forever();
    expect([r.status, r.headers.get('x-ratelimit-remaining')]).toEqual([200, '4']);

    const years = await start(options([{ ttl: 1000, limit: 1, blockDuration: days(365 * 50) }]));
    expect(await statuses(years, 2)).toEqual([200, 429]);
  });

  it('a function-valued limit giving NaN at request time refuses the request with its error, 500, as 6.7.1 (never admitted unlimited)', async () => {
    const get = await start(options([{ ttl: 1000, limit: () => Number('ten') }]), LoggedGuard);
    expect(await statuses(get, 2)).toEqual([500, 500]);
  });

  it('{ ttl: 60000, limit: 1, blockDuration: 2000 }: the refusal that starts the block says Retry-After: 2 (as 6.7.1), and the block ends then', async () => {
    const get = await start(options([{ ttl: 60_000, limit: 1, blockDuration: 2000 }]));
    const t0 = Date.now();
    expect((await get()).status).toBe(200);
    await sleepUntil(t0, 100);
    const refused = await get();
    // The block started before this answer came back, so it has ended 2 s after it (counted
    // from the answer, not from t0: a loaded machine may answer late).
    const refusedAt = Date.now();
    expect([refused.status, refused.headers.get('retry-after')]).toEqual([429, '2']);
    await sleepUntil(refusedAt, 2000 + 100);
    expect((await get()).status).toBe(200);
  });

  it('two throttlers without names ([{ ttl: 1000, limit: 3 }, { ttl: 60000, limit: 5 }]) answer 200 200 429 429 429 as 6.7.1 (one shared "default" count, each throttler adding one)', async () => {
    const get = await start(
      options([
        { ttl: 1000, limit: 3 },
        { ttl: 60_000, limit: 5 },
      ]),
    );
    const first = await get();
    // Both write the unsuffixed headers: the last one (limit 5, the shared count 2) stands.
    expect(first.headers.get('x-ratelimit-limit')).toBe('5');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('3');
    expect([first.status, ...(await statuses(get, 4))]).toEqual([200, 200, 429, 429, 429]);
  });

  it('a storage subclass overriding increment is called, once per request and throttler (6.7.1: 2 calls for 2 requests)', async () => {
    let calls = 0;
    const storage =
      store === 'redis'
        ? new (class extends RateLimitRedisStorage {
            override increment(...args: Parameters<RateLimitRedisStorage['increment']>) {
              calls++;
              return super.increment(...args);
            }
          })(redisUrl(), { prefix: uniquePrefix(), timeoutMs: 2000 })
        : new (class extends ThrottlerStorageService {
            override increment(...args: Parameters<ThrottlerStorageService['increment']>) {
              calls++;
              return super.increment(...args);
            }
          })();
    const get = await start({ throttlers: [{ ttl: 1000, limit: 5 }], storage });
    expect(await statuses(get, 2)).toEqual([200, 200]);
    expect(calls).toBe(2);
  });

  it('getTracker: () => 42, generateKey: (c, t) => t (not strings) answer 200 200 200 429 as 6.7.1', async () => {
    const get = await start(
      options([{ ttl: 1000, limit: 3 }], {
        getTracker: () => 42 as unknown as string,
        generateKey: (_: ExecutionContext, tracker: string) => tracker,
      }),
    );
    expect(await statuses(get, 4)).toEqual([200, 200, 200, 429]);
  });

  it('a pass-through handleRequest keeps the #2208 fix: [{ ttl: 1500, limit: 1 }] at 0, 1000, 1600 ms answers 200 429 200 (as the guard without it)', async () => {
    const get = await start(options([{ ttl: 1500, limit: 1 }]), PassThroughGuard);
    const t0 = Date.now();
    const out = [(await get()).status];
    // The window opened before the first answer came back: the last request goes no sooner
    // than 1500 ms after that answer, however late a loaded machine gave it.
    const firstAt = Date.now();
    await sleepUntil(t0, 1000);
    out.push((await get()).status);
    await sleepUntil(firstAt, Math.max(t0 + 1600 - firstAt, 1500 + 50));
    out.push((await get()).status);
    expect(out).toEqual([200, 429, 200]);
  });
});

describe('the drop-in at bootstrap and without a store', () => {
  it('a pass-through handleRequest with Redis down admits (fail-open), logged', async () => {
    class Logged extends PassThroughGuard {
      protected override logger = { warn: (m: string) => warnings.push(m) } as never;
    }
    warnings.length = 0;
    const storage = new RateLimitRedisStorage('redis://127.0.0.1:1');
    const get = await start({ throttlers: [{ ttl: 1000, limit: 2 }], storage }, Logged);
    expect(await statuses(get, 2)).toEqual([200, 200]);
    expect(warnings.join('\n')).toContain('rate_limit.backend_error');
  });

  it('a static limit that is no number fails at bootstrap, naming the setting, the throttler and the value', async () => {
    await expect(
      start([{ name: 'burst', ttl: 1000, limit: 'ten' as unknown as number }]),
    ).rejects.toThrow('Invalid "limit" for the "burst" throttler: expected a number, got "ten".');
  });

  it('providers: [ThrottlerStorageService] as a class provider resolves (6.7.1 does)', async () => {
    @Module({ providers: [ThrottlerStorageService] })
    class App {}
    const context = await NestFactory.createApplicationContext(App, {
      logger: false,
      abortOnError: false,
    });
    expect(context.get(ThrottlerStorageService)).toBeInstanceOf(ThrottlerStorageService);
    await context.close();
  });
});
