/**
 * A slow Redis, and a Redis killed mid-traffic then restarted (issue 5, items 2 and 3).
 *
 * Slow: `CLIENT PAUSE <ms> WRITE` from an admin connection holds every EVALSHA (a script
 * counts as a write) without dropping the connection. Requests must be answered within
 * `timeoutMs` + 50 ms by the route's failure policy, the circuit breaker opens and closes
 * again, and the scripts Redis runs late (after the pause) count exactly once each: the
 * limiter ignores their late replies, and the client never sends them twice.
 *
 * Killed: test/e2e/failure.test.ts covers the outage itself (fail-open, 503, one log line,
 * limiting resumes). Here: in-flight requests at the moment of the kill get no 5xx, and after
 * the restart (script cache gone) the very first request goes through NOSCRIPT -> EVAL
 * transparently and every request is counted exactly once.
 *
 * Each platform gets its own private redis-server.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  RATE_LIMIT_REDIS,
  RateLimit,
  RateLimiter,
  type RateLimitStore,
  type StorePolicy,
} from '../../lib/index.js';
import { CONSUME_SHA } from '../../lib/core/stores/redis/lua/consume.js';
import { disconnect, startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import { createApp, PLATFORMS, times, type AppHandle, type Reply } from './support/app.js';

@Controller('slow')
class SlowController {
  @Get('open')
  @RateLimit('100/h', { algorithm: 'fixed-window' })
  open() {
    return 'open';
  }

  @Get('closed')
  @RateLimit('100/h', { algorithm: 'fixed-window', failClosed: true })
  closed() {
    return 'closed';
  }
}

const TIMEOUT_MS = 100;
/** The bound: every answer within timeoutMs + 50 ms, measured around the HTTP call. */
const ANSWER_WITHIN_MS = TIMEOUT_MS + 50;
const LIMIT = 100;

async function timed(h: AppHandle, path: string, user: string): Promise<Reply & { ms: number }> {
  const t0 = performance.now();
  const reply = await h.get(path, { 'x-user': user });
  return { ...reply, ms: performance.now() - t0 };
}

/** Polls `check` every 25 ms for at most `timeoutMs`; false on timeout. */
async function pollUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (performance.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const remaining = (r: Reply) => Number(r.headers.get('x-ratelimit-remaining'));

describe.each(PLATFORMS)('Redis slow (CLIENT PAUSE WRITE), on %s', (platform) => {
  let server: RedisServerHandle;
  let admin: Redis;
  let h: AppHandle;
  let limiter: RateLimiter;
  /** Store calls per route ('open' / 'closed') for user `slow`, i.e. scripts sent to Redis. */
  const sent = { open: 0, closed: 0 };

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    h = await createApp(
      platform,
      {
        redis: server.url,
        timeoutMs: TIMEOUT_MS,
        circuitBreaker: { failureThreshold: 3, cooldownMs: 300 },
      },
      [SlowController],
      { userFromHeader: true },
    );
    limiter = h.app.get(RateLimiter);
    // Counts what actually reaches the store (calls the circuit breaker skips never do).
    const store: RateLimitStore = limiter.store;
    const consume = store.consume.bind(store);
    jest.spyOn(store, 'consume').mockImplementation((policies: readonly StorePolicy[]) => {
      for (const route of ['open', 'closed'] as const) {
        if (policies.some((p) => p.key.includes('{user:slow}') && p.key.includes(`.${route}:`)))
          sent[route]++;
      }
      return consume(policies);
    });
  });
  afterAll(async () => {
    await admin?.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    await h?.close();
    if (admin) disconnect(admin);
    await server?.kill();
  });

  it('counts normally before the pause', async () => {
    const open = await times(2, () => h.get('/slow/open', { 'x-user': 'slow' }));
    const closed = await times(2, () => h.get('/slow/closed', { 'x-user': 'slow' }));
    expect([...open, ...closed].map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect([...open, ...closed].map(remaining)).toEqual([99, 98, 99, 98]);
    expect(sent).toEqual({ open: 2, closed: 2 });
  });

  const during: (Reply & { ms: number; route: 'open' | 'closed'; state: string })[] = [];

  it(`while paused: fail-open 200 and failClosed 503 within ${ANSWER_WITHIN_MS} ms; the breaker opens after 3 timeouts`, async () => {
    // Held until CLIENT UNPAUSE below; the 20 s is only a backstop should the test die.
    expect(await admin.call('CLIENT', 'PAUSE', '20000', 'WRITE')).toBe('OK');
    const before = { ...sent };
    for (let i = 0; i < 12; i++) {
      const route = i % 2 === 0 ? 'open' : 'closed';
      const reply = await timed(h, `/slow/${route}`, 'slow');
      during.push({ ...reply, route, state: limiter.circuitState });
    }
    const open = during.filter((r) => r.route === 'open');
    const closed = during.filter((r) => r.route === 'closed');
    expect(open.map((r) => [r.status, r.body, r.rl])).toEqual(new Array(6).fill([200, 'open', {}]));
    expect(closed.map((r) => [r.status, r.headers.get('retry-after')])).toEqual(
      new Array(6).fill([503, '1']),
    );
    for (const reply of closed) {
      expect(reply.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable' });
    }
    // The first three calls reach Redis and time out; the third opens the circuit.
    expect(during.slice(0, 3).map((r) => r.state)).toEqual(['closed', 'closed', 'open']);
    expect(during.slice(0, 3).map((r) => r.ms >= TIMEOUT_MS)).toEqual([true, true, true]);
    // Every request, the timed-out ones included, within timeoutMs + 50 ms.
    const slowest = Math.max(...during.map((r) => r.ms));
    expect(slowest).toBeLessThan(ANSWER_WITHIN_MS);
    // Three scripts, plus one probe per cool-down that elapsed (each probe times out too).
    const reached = sent.open - before.open + sent.closed - before.closed;
    expect(reached).toBeGreaterThanOrEqual(3);
    expect(reached).toBeLessThanOrEqual(during.length);
    expect(limiter.circuitState).toBe('open');
  });

  it('after the pause and the cool-down, the circuit closes again', async () => {
    expect(await admin.call('CLIENT', 'UNPAUSE')).toBe('OK');
    // Another identity, so the counters of `slow` only see what the pause did to them.
    const closedAgain = await pollUntil(async () => {
      await h.get('/slow/open', { 'x-user': 'poller' });
      return limiter.circuitState === 'closed';
    }, 5000);
    expect(closedAgain).toBe(true);
  });

  it('late replies never double-count: each script sent during the pause spent exactly once', async () => {
    // Every script held by the pause ran once when it ended (the limiter ignored its late
    // reply; the client did not send it again), and nothing else spent anything: 2 before,
    // `sent` during (3 timed-out calls + probes), 1 now.
    const open = await h.get('/slow/open', { 'x-user': 'slow' });
    const closed = await h.get('/slow/closed', { 'x-user': 'slow' });
    expect([open.status, closed.status]).toEqual([200, 200]);
    const spent = { ...sent };
    expect({ open: remaining(open), closed: remaining(closed) }).toEqual({
      open: LIMIT - spent.open,
      closed: LIMIT - spent.closed,
    });
    // Of those, the paused ones: the 3 calls that opened the circuit plus the probes, no more
    // than the requests sent during the pause (2 + 2 before it, 1 + 1 just now).
    const pausedCalls = spent.open + spent.closed - (2 + 2) - (1 + 1);
    expect(pausedCalls).toBeGreaterThanOrEqual(3);
    expect(pausedCalls).toBeLessThanOrEqual(during.length);
    // The same, read without spending: a peek agrees with the header.
    const peek = await limiter.peek('user:slow', [
      { rate: '100/h', algorithm: 'fixed-window', scope: 'SlowController.open' },
    ]);
    expect(peek.policies[0]!.remaining).toBe(LIMIT - spent.open);
  });
});

describe.each(PLATFORMS)('Redis killed mid-traffic, then restarted, on %s', (platform) => {
  let server: RedisServerHandle;
  let admin: Redis;
  let h: AppHandle;
  let client: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    // retryStrategy keeps trying through the kill, so it is back after the restart.
    admin = new Redis(server.url, { maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    admin.on('error', () => undefined);
    h = await createApp(
      platform,
      // No circuit breaker: the first request after the restart must reach Redis, not be
      // skipped by an open circuit waiting for its cool-down.
      { redis: server.url, timeoutMs: TIMEOUT_MS, circuitBreaker: false },
      [SlowController],
      { userFromHeader: true },
    );
    client = h.app.get<Redis>(RATE_LIMIT_REDIS);
  });
  afterAll(async () => {
    await h?.close();
    if (admin) disconnect(admin);
    await server?.kill();
  });

  it('requests in flight when Redis dies get no 5xx and none hangs beyond timeoutMs + 50 ms', async () => {
    const replies: (Reply & { ms: number })[] = [];
    let killed: Promise<void> | undefined;
    // Two senders in parallel; the kill happens once 10 replies are in, so requests are in
    // flight at that moment. Bounded: 2 x 30 requests.
    const sender = async () => {
      for (let i = 0; i < 30; i++) {
        replies.push(await timed(h, '/slow/open', 'mid'));
        if (replies.length === 10) killed = server.kill();
      }
    };
    await Promise.all([sender(), sender()]);
    await killed;
    // Once the process is gone: admitted without Redis, so without rate-limit headers.
    const after = await times(5, () => h.get('/slow/open', { 'x-user': 'mid' }));
    expect(after.map((r) => [r.status, r.rl])).toEqual(new Array(5).fill([200, {}]));
    expect(replies).toHaveLength(60);
    expect(replies.filter((r) => r.status !== 200)).toEqual([]);
    expect(Math.max(...replies.map((r) => r.ms))).toBeLessThan(ANSWER_WITHIN_MS);
    // Some were counted before the kill, some admitted without Redis afterwards.
    expect(replies.some((r) => r.rl['x-ratelimit-remaining'] !== undefined)).toBe(true);
  });

  it('after the restart, the first request goes through NOSCRIPT -> EVAL and each request counts once', async () => {
    await server.restart();
    // Bounded polls on observable conditions: both clients reconnected.
    expect(await pollUntil(async () => client.status === 'ready', 10_000)).toBe(true);
    expect(await pollUntil(async () => admin.status === 'ready', 10_000)).toBe(true);
    expect(await admin.script('EXISTS', CONSUME_SHA)).toEqual([0]); // the cache is gone

    const replies = await times(5, () => h.get('/slow/open', { 'x-user': 'fresh' }));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    // The first one already counted: no fail-open, no double count.
    expect(replies.map(remaining)).toEqual([99, 98, 97, 96, 95]);
    expect(await admin.script('EXISTS', CONSUME_SHA)).toEqual([1]);

    // Redis saw one NOSCRIPT and one EVAL: the fallback ran exactly once, for the first request.
    const stats = await admin.info('commandstats');
    const calls = (cmd: string) =>
      Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    const failed = (cmd: string) =>
      Number(
        new RegExp(`cmdstat_${cmd}:.*?rejected_calls=(\\d+),failed_calls=(\\d+)`)
          .exec(stats)
          ?.slice(1)
          .reduce((a, b) => a + Number(b), 0) ?? 0,
      );
    expect(calls('eval')).toBe(1);
    expect(failed('evalsha')).toBe(1);
    expect(String(await admin.info('errorstats'))).toMatch(/errorstat_NOSCRIPT:count=1\r?\n/);
  });
});
