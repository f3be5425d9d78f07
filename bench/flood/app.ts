/**
 * The app of the flood reproduction (issue 22, finding 1), in a process of its own:
 *
 *   node bench/dist/flood/app.js <platform> <port> <redisUrl> <prefix> [denyCache]
 *
 * `GET /limited` behind `@RateLimit('3/m', { key: keys.ip })` and the module's default
 * options but for its key prefix (a fresh budget per run). Prints `ready` once listening;
 * answers the IPC message `stats` with the event-loop delay (ms) since the previous one. BENCH_NRL_ENTRY loads another build (a baseline's).
 */
import 'reflect-metadata';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { Controller, Get, Module, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { NrlPackage } from '../baseline.js';

const entry = process.env.BENCH_NRL_ENTRY;
const { RateLimit, RateLimitModule, keys } = (await (entry
  ? import(pathToFileURL(entry).href)
  : import('nest-rate-limit'))) as NrlPackage;

const [platform = 'express', port = '0', redisUrl = '', prefix = 'flood', denyCache] =
  process.argv.slice(2);

@Controller()
class FloodController {
  @Get('limited')
  @RateLimit('3/m', { key: keys.ip })
  limited() {
    return 'ok';
  }
}

/** Quiet, but for errors: the load generator tells fail-open answers by their missing headers. */
const logger: LoggerService = { log: () => undefined, warn: () => undefined, error: console.error };

@Module({
  imports: [
    RateLimitModule.forRoot({
      redis: redisUrl,
      prefix,
      ...(denyCache === 'denyCache' && { denyCache: true }),
    }),
  ],
  controllers: [FloodController],
})
class FloodModule {}

const app =
  platform === 'fastify'
    ? await NestFactory.create(FloodModule, new FastifyAdapter(), { logger })
    : await NestFactory.create(FloodModule, { logger });
await app.listen(Number(port), '127.0.0.1');

const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();
process.on('message', (message) => {
  if (message !== 'stats') return;
  process.send!({
    p99Ms: delay.percentile(99) / 1e6,
    maxMs: delay.max / 1e6,
  });
  delay.reset();
});
// The orchestrator going away (its IPC channel closing) ends this app too.
process.on('disconnect', () => void app.close().then(() => process.exit(0)));
console.log('ready');
