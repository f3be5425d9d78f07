/**
 * The @nestjs/throttler side of the migration test (test/e2e/migration.test.ts), in a process
 * of its own: the throttler is CommonJS and requires @nestjs/common, which NestJS 12 ships as
 * ESM only; Node loads that (require(esm)), Jest's module runtime does not.
 *
 *   node --import tsx/esm test/migration/throttler-app.ts <express|fastify>
 *
 * starts one app per row (each with its own storage) on 127.0.0.1, prints
 * `listening ["<url of row 0>", …]`, and serves until killed. (`tsx/esm`, not `tsx`: tsx's
 * CommonJS hook would compile a second copy of @nestjs/core for the throttler's `require`.)
 */
import 'reflect-metadata';
import { Controller, Get, Module, Param } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  SkipThrottle,
  Throttle,
  ThrottlerGuard,
  ThrottlerModule,
  type ThrottlerModuleOptions,
} from '@nestjs/throttler';

@Controller('cats')
class ThrottledCats {
  @Get()
  list() {
    return 'cats';
  }
  @Get('hot')
  @Throttle({ default: { limit: 3, ttl: 60000 } })
  hot() {
    return 'hot';
  }
  @Get('free')
  @SkipThrottle()
  free() {
    return 'free';
  }
  @Get('no-long')
  @SkipThrottle({ long: true })
  noLong() {
    return 'no-long';
  }
  @Get(':id')
  one(@Param('id') id: string) {
    return id;
  }
}

/** The throttler's options of each row, in the order of the test's rows. */
export const THROTTLER_ROWS: ThrottlerModuleOptions[] = [
  [{ ttl: 60000, limit: 10 }],
  [
    { name: 'short', ttl: 10000, limit: 3 },
    { name: 'long', ttl: 60000, limit: 5 },
  ],
  [{ ttl: 60000, limit: 10 }],
  [{ ttl: 60000, limit: 2 }],
  [
    { name: 'short', ttl: 10000, limit: 3 },
    { name: 'long', ttl: 60000, limit: 2 },
  ],
  {
    throttlers: [{ ttl: 60000, limit: 2 }],
    getTracker: (req) => (req.headers as Record<string, string>)['x-api-key']!,
  },
  {
    throttlers: [{ ttl: 60000, limit: 2 }],
    skipIf: (ctx) =>
      ctx.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-internal'] ===
      '1',
  },
  { throttlers: [{ ttl: 60000, limit: 2 }], ignoreUserAgents: [/bot/] },
  { throttlers: [{ ttl: 60000, limit: 1 }], errorMessage: 'Slow down' },
  [{ ttl: 1000, limit: 2, blockDuration: 60000 }],
];

async function startRow(options: ThrottlerModuleOptions, platform: string): Promise<string> {
  @Module({
    imports: [ThrottlerModule.forRoot(options)],
    controllers: [ThrottledCats],
    providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
  })
  class ThrottlerApp {}
  const settings = { logger: false as const, abortOnError: false };
  const app =
    platform === 'fastify'
      ? await NestFactory.create(ThrottlerApp, new FastifyAdapter(), settings)
      : await NestFactory.create(ThrottlerApp, settings);
  await app.listen(0, '127.0.0.1');
  return (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
}

async function main(): Promise<void> {
  const platform = process.argv[2];
  if (platform !== 'express' && platform !== 'fastify') {
    throw new Error('usage: throttler-app.ts <express|fastify>');
  }
  const urls: string[] = [];
  for (const options of THROTTLER_ROWS) urls.push(await startRow(options, platform));
  console.log(`listening ${JSON.stringify(urls)}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack : error);
  process.exit(1);
});
