/**
 * The app `npm run soak` drives (started by soak.ts as a child process, so the heap it
 * samples is the server's alone): one limited route and a heap probe.
 *
 *   REDIS_URL    the Redis to count in (required, unless REDIS_SENTINELS)
 *   REDIS_SENTINELS, REDIS_SENTINEL_NAME  `host:port,...` and the group's name: connect
 *                through Sentinel instead (SOAK_FAILOVER=sentinel)
 *   SOAK_PREFIX  key prefix, unique per run
 *   SOAK_RATE    the route's policy, default 20/10s, per `x-user` header
 *   SOAK_TIMEOUT_MS  the module's timeoutMs (default: the library's, 100)
 *   PORT         where to listen
 */
import 'reflect-metadata';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Controller, Get, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { keys, RateLimit, RateLimitModule, SkipRateLimit } from 'nest-rate-limit';

const RATE = process.env.SOAK_RATE ?? '20/10s';
const TIMEOUT_MS = process.env.SOAK_TIMEOUT_MS ? Number(process.env.SOAK_TIMEOUT_MS) : undefined;
const SENTINELS = process.env.REDIS_SENTINELS?.split(',').map((node) => {
  const [host, port] = node.split(':');
  return { host: host!, port: Number(port) };
});
/** Event-loop delay of the app: a stall delays Redis replies past the limiter's timeout. */
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();

@Controller()
class SoakController {
  @Get('limited')
  @RateLimit(RATE, { key: keys.header('x-user') })
  limited() {
    return { ok: true };
  }

  /** Memory after a full collection (the app runs with --expose-gc). */
  @Get('heap')
  @SkipRateLimit()
  heap() {
    const delay = {
      loopDelayMaxMs: loopDelay.max / 1e6,
      loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
    };
    loopDelay.reset();
    globalThis.gc?.();
    return { ...process.memoryUsage(), ...delay };
  }
}

@Module({
  imports: [
    RateLimitModule.forRoot({
      redis: SENTINELS
        ? { sentinels: SENTINELS, name: process.env.REDIS_SENTINEL_NAME ?? 'mymaster' }
        : (process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
      prefix: process.env.SOAK_PREFIX ?? 'soak',
      ...(TIMEOUT_MS ? { timeoutMs: TIMEOUT_MS } : {}),
    }),
  ],
  controllers: [SoakController],
})
class SoakModule {}

const app = await NestFactory.create(SoakModule, { logger: ['error', 'warn', 'log'] });
app.enableShutdownHooks();
await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
console.log(`soak app listening on ${process.env.PORT}`);
