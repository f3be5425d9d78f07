/**
 * A Nest app in an OS process of its own, for the concurrency-limit acceptance test
 * (test/integration/concurrency-limit.test.ts):
 *
 *   node --import tsx/esm test/harness/slot-worker.ts <express|fastify>
 *
 * with `NRL_TEST_REDIS_URL`, `NRL_SLOT_PREFIX`, `NRL_SLOT_LEASE_MS` and `NRL_SLOT_LIMIT` set.
 * Every route shares one concurrency limit on one identity (`hot`). Prints
 * `listening <url>`, then `entered` each time a request enters `/hold` (which never answers);
 * `/slow?ms=N` holds its slot N ms. `/intervals` answers the [enter, exit] wall-clock times
 * (ms, `performance.timeOrigin + performance.now()`) of every `/slow` handler run so far:
 * what the test counts overlaps on, on the server side.
 */
import 'reflect-metadata';
import { Controller, Get, Module, Query } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { performance } from 'node:perf_hooks';
import { ConcurrencyLimit, RateLimitModule, SkipRateLimit } from '../../lib/index.js';

const limit = Number(process.env.NRL_SLOT_LIMIT);
const leaseMs = Number(process.env.NRL_SLOT_LEASE_MS);
const intervals: [number, number][] = [];
const wallClock = () => performance.timeOrigin + performance.now();

@Controller()
@ConcurrencyLimit(limit, { key: () => 'hot', scope: 'slots', leaseMs })
class SlotController {
  @Get('slow')
  async slow(@Query('ms') ms: string) {
    const enter = wallClock();
    // The work a slow request does; nothing waits on it but this request.
    await new Promise((resolve) => setTimeout(resolve, Number(ms)));
    intervals.push([enter, wallClock()]);
    return 'done';
  }

  @Get('hold')
  async hold() {
    process.stdout.write('entered\n');
    await new Promise(() => undefined);
  }

  @Get('intervals')
  @SkipRateLimit()
  intervals() {
    return intervals;
  }
}

@Module({
  imports: [
    RateLimitModule.forRoot({
      redis: process.env.NRL_TEST_REDIS_URL!,
      prefix: process.env.NRL_SLOT_PREFIX!,
      timeoutMs: 10_000,
    }),
  ],
  controllers: [SlotController],
})
class SlotModule {}

const app =
  process.argv[2] === 'fastify'
    ? await NestFactory.create(SlotModule, new FastifyAdapter(), { logger: false })
    : await NestFactory.create(SlotModule, { logger: false });
await app.listen(0, '127.0.0.1');
const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
process.stdout.write(`listening ${url}\n`);
