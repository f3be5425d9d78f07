/**
 * Redis stopped mid-test (DESIGN §7, backend failure): fail-open answers fast, fail-closed
 * answers 503, the outage is logged once, and limiting resumes by itself once Redis is back
 * (issue 3, acceptance point 6).
 *
 * The tests of one platform run in order against one app and one private redis-server:
 * healthy, killed, restarted.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { RATE_LIMIT_REDIS, RateLimit, RateLimiter } from '../../lib/index.js';
import { startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import {
  CapturingLogger,
  createApp,
  PLATFORMS,
  times,
  type AppHandle,
  type Reply,
  pollUntil,
} from './support/app.js';

@Controller('outage')
class OutageController {
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

const TIMEOUT_MS = 100;
const BACKEND_ERROR = 'rate_limit.backend_error';
const logger = new CapturingLogger();

/** Sends one request and measures its latency. */
async function timed(h: AppHandle, path: string, user: string): Promise<Reply & { ms: number }> {
  const t0 = performance.now();
  const reply = await h.get(path, { 'x-user': user });
  return { ...reply, ms: performance.now() - t0 };
}

describe.each(PLATFORMS)('Redis stopped mid-test, on %s', (platform) => {
  let server: RedisServerHandle;
  let h: AppHandle;
  let client: Redis;
  /** Resolves on the first failed reconnection of the module's client (ECONNREFUSED). */
  let reconnectRefused: Promise<void>;

  beforeAll(async () => {
    server = await startRedisServer();
    h = await createApp(
      platform,
      {
        redis: server.url,
        timeoutMs: TIMEOUT_MS,
        circuitBreaker: { failureThreshold: 2, cooldownMs: 200 },
      },
      [OutageController],
      { logger, userFromHeader: true },
    );
    client = h.app.get<Redis>(RATE_LIMIT_REDIS);
  });
  afterAll(async () => {
    await h?.close();
    await server?.kill();
  });

  it('limits with headers while Redis is up', async () => {
    const replies = await times(2, () => h.get('/outage/closed', { 'x-user': 'healthy' }));
    expect(replies.map((r) => r.status)).toEqual([200, 200]);
    expect(replies.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['2', '1']);
  });

  const during: (Reply & { ms: number; route: string })[] = [];
  let outageMs = 0;

  it(`after a kill, fail-open answers 200 within timeoutMs + 50 ms and failClosed answers 503 with Retry-After: 1`, async () => {
    reconnectRefused = new Promise((resolve) => {
      const onError = (error: Error & { syscall?: string }) => {
        if (error.syscall !== 'connect') return;
        client.off('error', onError);
        resolve();
      };
      client.on('error', onError);
    });
    logger.clear();
    await server.kill();

    const started = performance.now();
    for (let i = 0; i < 20; i++) {
      const route = i % 2 === 0 ? 'open' : 'closed';
      during.push({ route, ...(await timed(h, `/outage/${route}`, 'during')) });
    }
    outageMs = performance.now() - started;

    const open = during.filter((r) => r.route === 'open');
    const closed = during.filter((r) => r.route === 'closed');
    expect(open.map((r) => r.status)).toEqual(new Array(10).fill(200));
    expect(open.map((r) => r.body)).toEqual(new Array(10).fill('open'));
    // No store answer, so no rate-limit headers.
    expect(open.map((r) => r.rl)).toEqual(new Array(10).fill({}));
    expect(closed.map((r) => r.status)).toEqual(new Array(10).fill(503));
    expect(closed.map((r) => r.headers.get('retry-after'))).toEqual(new Array(10).fill('1'));
    for (const reply of closed) {
      expect(reply.body).toEqual({
        statusCode: 503,
        error: 'Service Unavailable',
        message: expect.any(String),
        retryAfter: 1,
      });
    }
    // Every request, the first after the kill included, within timeoutMs + 50 ms.
    for (const reply of during) expect(reply.ms).toBeLessThan(TIMEOUT_MS + 50);
    // Two failures opened the circuit: the store is skipped until the cool-down ends.
    expect(h.app.get(RateLimiter).circuitState).toBe('open');
  });

  it(`the guard logs one ${BACKEND_ERROR} line for 20 failing requests, not one per request`, () => {
    expect(during).toHaveLength(20);
    expect(outageMs).toBeLessThan(3000); // well under the 10 s interval
    const fromGuard = logger.matching(BACKEND_ERROR).filter((line) => line.includes('"route"'));
    expect(fromGuard).toHaveLength(1);
    const detail = JSON.parse(fromGuard[0]!.slice(fromGuard[0]!.indexOf('{')));
    expect(detail).toMatchObject({ kind: 'unavailable', count: 1 });
    expect(['OutageController.open', 'OutageController.closed']).toContain(detail.route);
  });

  // Regression: two `rate_limit.backend_error` lines of kind "unavailable" within one outage
  // (DESIGN §7: at most once per 10 s per error kind): the module's own client also logged
  // one when ioredis failed to reconnect. It now logs `rate_limit.redis_unreachable`.
  // Input: RateLimitModule.forRoot({ redis: <url>, timeoutMs: 100 }), kill Redis, send requests.
  it(`the whole outage has one ${BACKEND_ERROR} line, the client's own report included`, async () => {
    // The module's client reports its failed reconnection; wait for that, bounded.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      reconnectRefused,
      new Promise((resolve) => (timer = setTimeout(resolve, 3000))),
    ]);
    clearTimeout(timer);
    expect(logger.matching(BACKEND_ERROR)).toHaveLength(1);
  });

  it('after a restart, limiting resumes by itself', async () => {
    await server.restart();
    // Bounded poll: the client reconnects and the circuit breaker probes after its cool-down.
    const back = await pollUntil(
      async () =>
        (await h.get('/outage/open', { 'x-user': 'poll' })).rl['x-ratelimit-limit'] === '3',
      5000,
    );
    expect(back).toBe(true);

    const open = await times(4, () => h.get('/outage/open', { 'x-user': 'after' }));
    expect(open.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(open.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['2', '1', '0', '0']);
    const closed = await times(4, () => h.get('/outage/closed', { 'x-user': 'after' }));
    expect(closed.map((r) => r.status)).toEqual([200, 200, 200, 429]);
  });
});
