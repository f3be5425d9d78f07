/**
 * Overload protection (the `overload` option) in a Nest app in an OS process of its own, on
 * Express and Fastify: its limit fixed at 2 calls in flight and saturated by calls it holds,
 * so that every answer is decided by the admission rules alone.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { fileURLToPath } from 'node:url';
import { redisUrl } from '../harness/redis.js';
import { AppProcess } from './support/app-process.js';
import { PLATFORMS, uniquePrefix, type Reply } from './support/app.js';

const WORKER = fileURLToPath(new URL('./support/overload-worker.ts', import.meta.url));

describe.each(PLATFORMS)('overload protection on %s', (platform) => {
  let app: AppProcess;
  let redis: Redis;
  const prefix = uniquePrefix();
  beforeAll(async () => {
    redis = new Redis(redisUrl());
    app = await AppProcess.start(WORKER, { platform, prefix });
  }, 60_000);
  afterAll(async () => {
    await app?.stop();
    redis?.disconnect();
  });

  it('sheds sheddable and normal calls at the limit, admits critical ones up to the cap, spends no rate-limit budget on a shed call, keeps an exempt health check, and logs the episode once', async () => {
    // Two sheddable calls held: the limit (2) is reached.
    const holds = [app.get('/hold'), app.get('/hold')];
    while ((await app.get('/held')).body !== 2) {
      // Polled on the app's own state: the holds have reached their handler.
    }

    const shed = await Promise.all(Array.from({ length: 10 }, () => app.get('/hold')));
    const limited = await Promise.all(Array.from({ length: 5 }, () => app.get('/limited')));
    const normal = await app.get('/normal');
    const critical = await Promise.all(Array.from({ length: 5 }, () => app.get('/critical')));
    const health = await app.get('/health');

    expect(statuses(shed)).toEqual({ 503: 10 });
    expect(statuses(limited)).toEqual({ 503: 5 });
    expect(normal.status).toBe(503);
    expect(statuses(critical)).toEqual({ 200: 5 });
    expect(health.status).toBe(200);
    expect(shed[0]!.headers.get('retry-after')).toBe('1');
    expect(shed[0]!.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: 'The server is overloaded; retry shortly',
      retryAfter: 1,
    });
    // A shed call never reached the store: the rate-limited route's budget has no key yet.
    expect(await redis.keys(`${prefix}:*one-client*`)).toEqual([]);

    expect((await app.get('/open')).body).toBe(2);
    expect((await Promise.all(holds)).map((r) => r.status)).toEqual([200, 200]);
    // 2 s without a shed call ends the episode.
    await app.printedLine(/rate_limit\.shedding_stopped/, 20_000);

    // The whole budget is left: 3 admitted, then 429.
    const after = [];
    for (let i = 0; i < 4; i++) after.push(await app.get('/limited'));
    expect(after.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(after[0]!.headers.get('x-ratelimit-remaining')).toBe('2');
    expect(await redis.keys(`${prefix}:*one-client*`)).toHaveLength(1);

    const lines = app.output.split('\n');
    const started = lines.filter((l) => l.includes('rate_limit.shedding_started'));
    const stopped = lines.filter((l) => l.includes('rate_limit.shedding_stopped'));
    expect(started).toHaveLength(1);
    expect(stopped).toHaveLength(1);
    const episode = JSON.parse(stopped[0]!.slice(stopped[0]!.indexOf('{'))) as {
      shed: Record<string, number>;
      pools: string[];
    };
    expect(episode.shed).toEqual({ critical: 0, high: 0, normal: 1, sheddable: 15 });
    expect(episode.pools).toEqual(['process']);
  }, 60_000);
});

function statuses(replies: Reply[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const r of replies) counts[r.status] = (counts[r.status] ?? 0) + 1;
  return counts;
}
