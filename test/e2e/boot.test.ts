/**
 * Redis down at boot (issue 5, item 1): the app still starts; fail-open routes serve,
 * fail-closed routes answer 503, the log says why once; once Redis appears, limiting starts
 * without a restart.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { RateLimit } from '../../lib/index.js';
import { startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import {
  CapturingLogger,
  createApp,
  PLATFORMS,
  pollUntil,
  times,
  type AppHandle,
} from './support/app.js';

@Controller('boot')
class BootController {
  @Get('open')
  @RateLimit('3/m')
  open() {
    return 'open';
  }

  @Get('closed')
  @RateLimit('3/m', { failClosed: true })
  closed() {
    return 'closed';
  }
}

describe.each(PLATFORMS)('Redis down at boot, on %s', (platform) => {
  const logger = new CapturingLogger();
  let server: RedisServerHandle;
  let h: AppHandle;
  let bootMs: number;

  beforeAll(async () => {
    server = await startRedisServer();
    await server.stop(); // its port is now known and refuses connections
    const t0 = performance.now();
    h = await createApp(
      platform,
      {
        redis: server.url,
        connectTimeoutMs: 200,
        timeoutMs: 100,
        circuitBreaker: { failureThreshold: 2, cooldownMs: 200 },
      },
      [BootController],
      { logger, userFromHeader: true },
    );
    bootMs = performance.now() - t0;
  }, 30_000);

  afterAll(async () => {
    await h?.close();
    await server?.stop();
  });

  it('starts anyway, within the bounded wait for the first connection', () => {
    // Generous for a loaded machine; an app that waited for Redis would not start at all.
    expect(bootMs).toBeLessThan(15_000);
    expect(logger.matching('Redis not reachable within 200 ms')).toEqual([
      'Redis not reachable within 200 ms: starting anyway; limits apply once it is ' +
        '(see docs/reference/errors.md#rate_limitredis_unreachable in the nest-rate-limit package)',
    ]);
  });

  it('serves fail-open routes and answers 503 on fail-closed ones, logging the cause once', async () => {
    const open = await times(5, () => h.get('/boot/open', { 'x-user': 'a' }));
    expect(open.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(open[0]!.headers.get('x-ratelimit-limit')).toBeNull();
    const closed = await h.get('/boot/closed', { 'x-user': 'a' });
    expect(closed.status).toBe(503);
    expect(closed.headers.get('retry-after')).toBe('1');
    expect(logger.matching('rate_limit.backend_error')).toHaveLength(1);
    const unreachable = logger.matching('rate_limit.redis_unreachable {');
    expect(unreachable).toHaveLength(1);
    expect(JSON.parse(unreachable[0]!.slice(unreachable[0]!.indexOf('{')))).toEqual({
      message: expect.any(String),
      docs: 'docs/reference/errors.md#rate_limitredis_unreachable',
    });
  });

  it('starts limiting once Redis appears, without a restart', async () => {
    await server.restart();
    const limited = await pollUntil(
      async () =>
        (await h.get('/boot/open', { 'x-user': 'probe' })).headers.get('x-ratelimit-limit') === '3',
      10_000,
    );
    expect(limited).toBe(true);
    const replies = await times(4, () => h.get('/boot/open', { 'x-user': 'b' }));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect((await h.get('/boot/closed', { 'x-user': 'b' })).status).toBe(200);
  }, 20_000);
});
