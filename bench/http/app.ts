/**
 * One app of the HTTP benchmark, in a process of its own so the load generator never
 * shares its event loop:
 *
 *   node bench/dist/http/app.js <platform> <variant> <port> <redisUrl>
 *
 * An `@base` variant (`nrl-tb@base`) is the same app on the package BENCH_NRL_ENTRY names.
 * Serves `GET /hi` ('hi') behind the variant's limiter and prints `ready` once listening.
 * Every limit is far above what a run can send: the benchmark measures the cost of
 * deciding, never of refusing. All load comes from 127.0.0.1, so every request counts
 * against one key, as one busy client would.
 */
import 'reflect-metadata';
import { Session } from 'node:inspector';
import { pathToFileURL } from 'node:url';
import {
  Controller,
  Get,
  HttpException,
  HttpStatus,
  Module,
  type CanActivate,
  type ExecutionContext,
  type ModuleMetadata,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import { Redis } from 'ioredis';
import type { DecisionEvent, DecisionOutcome } from 'nest-rate-limit';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { NrlPackage } from '../baseline.js';
import { FLOOR_CLIENTS, floorCall, floorClient } from '../floor.js';
import { currentOf } from '../twins.js';
// Types only: importing the orchestrator's code would load autocannon into every app.
import type { HttpPlatform, HttpVariant } from './index.js';

/**
 * The package: the current build, or for an `@base` variant the baseline's built entry,
 * which the benchmark passes in BENCH_NRL_ENTRY (see baseline.ts).
 */
const entry = process.env.BENCH_NRL_ENTRY;
const { ConcurrencyLimit, RateLimit, RateLimitModule } = (await (entry
  ? import(pathToFileURL(entry).href)
  : import('nest-rate-limit'))) as NrlPackage;

/** Never reached in a run (limit x period must stay within the library's 2^50). */
const PER_MINUTE = 1_000_000_000;
const BURST = '1000000/s';
/** The largest round daily limit the library accepts: 1e7 x 86.4e6 ms < 2^50. */
const DAILY = '10000000/d';

@Controller()
class HiController {
  @Get('hi')
  hi() {
    return 'hi';
  }
}

/** The same route with two stacked policies and no module default: two keys per request. */
@Controller()
class StackedController {
  @Get('hi')
  @RateLimit(BURST, { name: 'burst' })
  @RateLimit(DAILY, { name: 'daily' })
  hi() {
    return 'hi';
  }
}

/** `count: 'failed'`: every request spends, and every success (all of them) is refunded. */
@Controller()
class CountFailedController {
  @Get('hi')
  @RateLimit(`${PER_MINUTE}/m`, { count: 'failed' })
  hi() {
    return 'hi';
  }
}

/** A penalty (`block`) that never fires: what checking for one costs. */
@Controller()
class BlockController {
  @Get('hi')
  @RateLimit(`${PER_MINUTE}/m`, { block: '15m' })
  hi() {
    return 'hi';
  }
}

/** A concurrency limit above the connections: a slot taken and given back per request. */
@Controller()
class ConcurrentController {
  @Get('hi')
  @ConcurrencyLimit(100_000)
  hi() {
    return 'hi';
  }
}

/**
 * `nrl-tb-observed`'s `onDecision` hook: trivial work, as the option asks of a hook (a
 * counter per outcome), so that the variant measures what observing costs the module.
 */
const outcomes: Partial<Record<DecisionOutcome, number>> = {};
function onDecision(event: DecisionEvent): void {
  outcomes[event.outcome] = (outcomes[event.outcome] ?? 0) + 1;
}

/** What Express's `res` and Fastify's `reply` both have. */
interface HeaderSink {
  header(name: string, value: string | number): unknown;
}

/**
 * A NestJS guard over rate-limiter-flexible as its README suggests: consume a point per
 * request by IP; 429 with Retry-After when out of points, the X-RateLimit-* headers otherwise.
 */
class RlfGuard implements CanActivate {
  constructor(
    private readonly limiter: RateLimiterRedis,
    private readonly points: number,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const http = context.switchToHttp();
    const ip = http.getRequest<{ ip?: string }>().ip ?? 'unknown';
    const res = http.getResponse<HeaderSink>();
    try {
      this.setHeaders(res, await this.limiter.consume(ip));
      return true;
    } catch (rejection) {
      // rlf rejects with an Error when Redis fails, with a RateLimiterRes when out of points.
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      this.setHeaders(res, rejection);
      res.header('Retry-After', Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)));
      throw new HttpException('Too Many Requests', HttpStatus.TOO_MANY_REQUESTS);
    }
  }

  private setHeaders(res: HeaderSink, r: RateLimiterRes): void {
    res.header('X-RateLimit-Limit', this.points);
    res.header('X-RateLimit-Remaining', r.remainingPoints);
    res.header('X-RateLimit-Reset', Math.ceil((Date.now() + r.msBeforeNext) / 1000));
  }
}

/**
 * The floor (see bench/floor.ts): one EVALSHA of an empty script per request, on a client
 * tuned as the module's; admits everything and sets no header.
 */
class FloorGuard implements CanActivate {
  constructor(private readonly client: Redis) {}

  async canActivate(): Promise<boolean> {
    await floorCall(this.client);
    return true;
  }
}

/** The module metadata of one variant. `prefix` keeps its Redis keys apart from the others'. */
function variantModule(variant: string, redisUrl: string, prefix: string): ModuleMetadata {
  const nrl = (options: Parameters<typeof RateLimitModule.forRoot>[0]) => ({
    imports: [RateLimitModule.forRoot({ prefix, ...options })],
    controllers: [HiController],
  });
  const perMinute = `${PER_MINUTE}/m`;
  // An `@base` twin is the same variant on the baseline's build (loaded above).
  switch (currentOf(variant) as HttpVariant) {
    case 'none':
      return { controllers: [HiController] };
    case 'floor-redis':
    case 'floor-redis-autopipelining':
    case 'floor-redis-defaults': {
      const settings =
        FLOOR_CLIENTS[
          variant === 'floor-redis'
            ? 'module'
            : (variant.slice('floor-redis-'.length) as 'defaults')
        ];
      return {
        controllers: [HiController],
        providers: [
          {
            provide: APP_GUARD,
            // Connected and the script loaded before the app listens, as the module waits for its client.
            useFactory: async () => new FloorGuard(await floorClient(redisUrl, settings)),
          },
        ],
      };
    }
    case 'nrl-tb':
      return nrl({ redis: redisUrl, default: perMinute, algorithm: 'token-bucket' });
    case 'nrl-tb-observed':
      // prom-client's metrics and a hook: what a user who watches decisions pays.
      return nrl({
        redis: redisUrl,
        default: perMinute,
        algorithm: 'token-bucket',
        metrics: true,
        onDecision,
      });
    case 'nrl-gcra':
      return nrl({ redis: redisUrl, default: perMinute, algorithm: 'gcra' });
    case 'nrl-sw':
      return nrl({ redis: redisUrl, default: perMinute, algorithm: 'sliding-window' });
    case 'nrl-stacked':
      return {
        imports: [RateLimitModule.forRoot({ redis: redisUrl, prefix, algorithm: 'token-bucket' })],
        controllers: [StackedController],
      };
    case 'nrl-count-failed':
    case 'nrl-block':
    case 'nrl-concurrent': {
      const controller = {
        'nrl-count-failed': CountFailedController,
        'nrl-block': BlockController,
        'nrl-concurrent': ConcurrentController,
      }[currentOf(variant) as 'nrl-count-failed' | 'nrl-block' | 'nrl-concurrent'];
      return {
        imports: [RateLimitModule.forRoot({ redis: redisUrl, prefix })],
        controllers: [controller],
      };
    }
    case 'nrl-memory':
      return nrl({ store: 'memory', default: perMinute, algorithm: 'token-bucket' });
    case 'throttler-memory':
      return {
        imports: [ThrottlerModule.forRoot([{ ttl: 60_000, limit: PER_MINUTE }])],
        controllers: [HiController],
        providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
      };
    case 'throttler-redis': {
      // The storage builds its own keys: the client's keyPrefix is how a user separates them.
      const client = new Redis(redisUrl, { keyPrefix: `${prefix}:` });
      const storage = new ThrottlerStorageRedisService(client);
      return {
        imports: [
          ThrottlerModule.forRoot({ throttlers: [{ ttl: 60_000, limit: PER_MINUTE }], storage }),
        ],
        controllers: [HiController],
        providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
      };
    }
    case 'rlf-redis': {
      const limiter = new RateLimiterRedis({
        storeClient: new Redis(redisUrl),
        keyPrefix: prefix,
        points: PER_MINUTE,
        duration: 60,
      });
      return {
        controllers: [HiController],
        providers: [{ provide: APP_GUARD, useValue: new RlfGuard(limiter, PER_MINUTE) }],
      };
    }
    default:
      throw new Error(`unknown variant ${String(variant)}`);
  }
}

let profiler: Session | undefined;

/** `'profile:start'` starts a CPU profile; `'profile:stop'` sends it back (profile.ts). */
async function profiling(message: unknown): Promise<void> {
  const post = <T>(method: string, params?: object) =>
    new Promise<T>((resolve, reject) =>
      profiler!.post(method, params, (error, result) =>
        error ? reject(error) : resolve(result as T),
      ),
    );
  if (message === 'profile:start') {
    profiler?.disconnect();
    profiler = new Session();
    profiler.connect();
    await post('Profiler.enable');
    await post('Profiler.setSamplingInterval', { interval: 100 });
    await post('Profiler.start');
  } else if (message === 'profile:stop' && profiler) {
    const { profile } = await post<{ profile: unknown }>('Profiler.stop');
    profiler.disconnect();
    profiler = undefined;
    process.send!({ profile });
  }
}

async function main(): Promise<void> {
  // Started by the benchmark (an IPC channel): die with it, even when it is killed without a
  // chance to stop its apps, and even while this one is still booting.
  if (process.send) {
    process.on('disconnect', () => process.exit(0));
    if (!process.connected) process.exit(0);
    // profile.ts's messages: a CPU profile of the load alone, without the boot.
    process.on('message', (message) => {
      profiling(message).catch((error: unknown) => process.send!({ profileError: String(error) }));
    });
  }
  const [platform, variant, port, redisUrl] = process.argv.slice(2) as [
    HttpPlatform,
    string,
    string?,
    string?,
  ];
  if ((platform !== 'express' && platform !== 'fastify') || !port || !redisUrl) {
    throw new Error('usage: app.js <express|fastify> <variant> <port> <redisUrl>');
  }
  // The pid keeps counters of both platforms, and of earlier runs on the same Redis, apart;
  // an `@base` twin's too, under a name as long as its twin's (and without the `@`, which no
  // prefix may hold).
  const prefix = `bench:${currentOf(variant)}:${process.pid}`;

  @Module(variantModule(variant, redisUrl, prefix))
  class BenchModule {}

  // Without a logger, Nest's abortOnError would exit without a word: let the error through.
  const options = { logger: false, abortOnError: false } as const;
  const app =
    platform === 'express'
      ? await NestFactory.create(BenchModule, options)
      : await NestFactory.create(BenchModule, new FastifyAdapter(), options);
  await app.listen(Number(port), '127.0.0.1');
  console.log('ready');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
