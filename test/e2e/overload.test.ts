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
    // The two holds in flight, at a limit of 2; each shed call counted under its priority.
    expect(overloadSamples(await app.get('/metrics'))).toEqual({
      'rate_limit_overload_limit{pool="process"}': 2,
      'rate_limit_overload_in_flight{pool="process",priority="critical"}': 0,
      'rate_limit_overload_in_flight{pool="process",priority="high"}': 0,
      'rate_limit_overload_in_flight{pool="process",priority="normal"}': 0,
      'rate_limit_overload_in_flight{pool="process",priority="sheddable"}': 2,
      'rate_limit_overload_shed_total{pool="process",priority="critical"}': 0,
      'rate_limit_overload_shed_total{pool="process",priority="high"}': 0,
      'rate_limit_overload_shed_total{pool="process",priority="normal"}': 1,
      'rate_limit_overload_shed_total{pool="process",priority="sheddable"}': 15,
      rate_limit_overload_shedding: 1,
    });

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
    // At bootstrap, one line says the option took, with the settings it runs with.
    const enabled = lines.filter((l) => l.includes('rate_limit.overload_enabled'));
    expect(enabled).toHaveLength(1);
    expect(JSON.parse(enabled[0]!.slice(enabled[0]!.indexOf('{')))).toEqual({
      minLimit: 2,
      maxLimit: 2,
      maxTurnMs: false,
      maxEventLoopDelayMs: false,
      queueMs: 0,
      defaultPriority: 'normal',
      pools: [],
    });
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
    expect(overloadSamples(await app.get('/metrics'))).toMatchObject({
      'rate_limit_overload_in_flight{pool="process",priority="sheddable"}': 0,
      rate_limit_overload_shedding: 0,
    });
  }, 60_000);

  it('a @Priority function picks the priority per call: critical for the gold tier, sheddable for the others', async () => {
    const holds = [app.get('/hold'), app.get('/hold')];
    while ((await app.get('/held')).body !== 2) {
      // Polled on the app's own state: the holds have reached their handler.
    }
    const gold = await app.get('/tiered', { 'x-tier': 'gold' });
    const plain = await app.get('/tiered');
    const silver = await app.get('/tiered', { 'x-tier': 'silver' });
    expect([gold.status, plain.status, silver.status]).toEqual([200, 503, 503]);
    const metrics = overloadSamples(await app.get('/metrics'));
    expect(metrics['rate_limit_overload_shed_total{pool="process",priority="critical"}']).toBe(0);
    // 15 in the episode before, 2 now.
    expect(metrics['rate_limit_overload_shed_total{pool="process",priority="sheddable"}']).toBe(17);
    expect((await app.get('/open')).body).toBe(2);
    expect((await Promise.all(holds)).map((r) => r.status)).toEqual([200, 200]);
    // Below the limit, the function's sheddable answer is admitted.
    expect((await app.get('/tiered')).status).toBe(200);
  }, 60_000);
});

describe.each(PLATFORMS)('the end of an HTTP call on %s', (platform) => {
  let app: AppProcess;
  beforeAll(async () => {
    app = await AppProcess.start(WORKER, { platform, prefix: uniquePrefix() });
  }, 60_000);
  afterAll(() => app?.stop());

  const sheddableInFlight = async () =>
    overloadSamples(await app.get('/metrics'))[
      'rate_limit_overload_in_flight{pool="process",priority="sheddable"}'
    ];

  it('gives a slot back when its response is sent, and when its client leaves while its handler runs', async () => {
    const left = new AbortController();
    const gone = fetch(`${app.url}/hold`, { signal: left.signal }).catch(() => 'aborted');
    const kept = app.get('/hold');
    while ((await app.get('/held')).body !== 2) {
      // Polled on the app's own state: both calls have reached their handler.
    }
    expect(await sheddableInFlight()).toBe(2);
    left.abort();
    expect(await gone).toBe('aborted');
    while ((await sheddableInFlight()) !== 1) {
      // Polled on the app's own state: the response's close has reached the app.
    }
    // The freed slot admits a sheddable call while the other hold still runs.
    expect((await app.get('/limited')).status).toBe(200);

    expect((await app.get('/open')).body).toBe(2);
    expect((await kept).status).toBe(200);
    expect(await sheddableInFlight()).toBe(0);
  }, 60_000);
});

describe.each(PLATFORMS)('the bounded queue (queueMs) on %s', (platform) => {
  let app: AppProcess;
  beforeAll(async () => {
    // Longer than any wait here: the high call leaves the queue when a slot frees, never by
    // the clock.
    app = await AppProcess.start(WORKER, { platform, prefix: uniquePrefix(), queueMs: 10_000 });
  }, 60_000);
  afterAll(() => app?.stop());

  it('a high call waits at the limit and passes when a slot frees; a sheddable call never waits', async () => {
    const holds = [app.get('/hold'), app.get('/hold')];
    while ((await app.get('/held')).body !== 2) {
      // Polled on the app's own state: the holds have reached their handler.
    }
    const high = app.get('/high');
    while ((await app.get('/queued')).body !== 1) {
      // Polled on the app's own state: the high call is in the queue.
    }
    // Answered while the slots are still held: it did not wait for one.
    const sheddable = await app.get('/hold');
    expect(sheddable.status).toBe(503);
    expect((await app.get('/queued')).body).toBe(1);

    expect((await app.get('/open')).body).toBe(2);
    expect((await high).status).toBe(200);
    expect((await Promise.all(holds)).map((r) => r.status)).toEqual([200, 200]);
    const metrics = overloadSamples(await app.get('/metrics'));
    expect(metrics).toMatchObject({
      'rate_limit_overload_queue_wait_seconds_count{pool="process",outcome="admitted"}': 1,
      'rate_limit_overload_shed_total{pool="process",priority="high"}': 0,
      'rate_limit_overload_shed_total{pool="process",priority="sheddable"}': 1,
      'rate_limit_overload_in_flight{pool="process",priority="high"}': 0,
    });
    expect(
      metrics['rate_limit_overload_queue_wait_seconds_count{pool="process",outcome="shed"}'] ?? 0,
    ).toBe(0);
    expect((await app.get('/queued')).body).toBe(0);
  }, 60_000);
});

/**
 * The overload metrics of a `/metrics` scrape (Prometheus text), as `name{labels}` → value;
 * the histograms by their `_count` alone.
 */
function overloadSamples(reply: Reply): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of String(reply.body).split('\n')) {
    const sample = /^(rate_limit_overload_\S+) (\S+)$/.exec(line);
    if (!sample || /_(bucket|sum)\{/.test(sample[1]!)) continue;
    if (sample[1]!.startsWith('rate_limit_overload_event_loop')) continue;
    out[sample[1]!] = Number(sample[2]);
  }
  return out;
}

function statuses(replies: Reply[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const r of replies) counts[r.status] = (counts[r.status] ?? 0) + 1;
  return counts;
}
