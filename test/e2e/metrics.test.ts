/**
 * Metrics and decision events (issue 7): the Prometheus registry scraped after known traffic
 * shows exact counts, a store failure counts as a backend error and opens the circuit gauge,
 * `onDecision` sees every evaluated request in order, a throwing hook changes nothing, and
 * without the `metrics` option prom-client registers nothing.
 */
import 'reflect-metadata';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { Registry, register as globalRegister } from 'prom-client';
import {
  RATE_LIMIT_REDIS,
  RateLimit,
  RateLimitConfigError,
  SkipRateLimit,
  type DecisionEvent,
} from '../../lib/index.js';
import { createResources } from '../../lib/nest/module/resources.js';
import { startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import {
  bootstrap,
  CapturingLogger,
  createApp,
  PLATFORMS,
  pollUntil,
  rootModule,
  times,
  type AppHandle,
} from './support/app.js';

@Controller('m')
class MetricsController {
  @Get('five')
  @RateLimit('5/m')
  five() {
    return 'ok';
  }

  @Get('ten')
  @RateLimit('10/m', { name: 'ten' })
  ten() {
    return 'ok';
  }

  // `trial` would refuse from the 3rd request but is only watched; `enforced` refuses the 5th.
  @Get('shadow')
  @RateLimit('2/m', { name: 'trial', shadow: true })
  @RateLimit('4/m', { name: 'enforced' })
  shadow() {
    return 'ok';
  }

  @Get('closed')
  @RateLimit('5/m', { name: 'closed', failClosed: true })
  closed() {
    return 'ok';
  }

  @Get('free')
  @SkipRateLimit()
  free() {
    return 'ok';
  }
}

/** The samples of a Prometheus text exposition: `name{labels}` -> value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    out.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return out;
}

/** The samples whose name starts with `prefix`, sorted, for whole-set assertions. */
async function scrape(registry: Registry, prefix = 'rate_limit_'): Promise<Record<string, number>> {
  const all = samples(await registry.metrics());
  return Object.fromEntries(
    [...all].filter(([name]) => name.startsWith(prefix)).sort(([a], [b]) => a.localeCompare(b)),
  );
}

/** The histogram's `_bucket` samples left out: their count is asserted through `_count`. */
function withoutBuckets(scraped: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(scraped).filter(([name]) => !name.includes('_bucket')));
}

function hash(identity: string): string {
  return createHash('sha256').update(identity).digest('base64url').slice(0, 12);
}

describe.each(PLATFORMS)('metrics on %s', (platform) => {
  const registry = new Registry();
  let h: AppHandle;

  beforeAll(async () => {
    h = await createApp(
      platform,
      { algorithm: 'fixed-window', metrics: { registry } },
      [MetricsController],
      { userFromHeader: true },
    );
  });
  afterAll(() => h?.close());

  it('7 requests to a 5/m route and 12 to a 10/m route: exact decisions, near-limit and store-call counts', async () => {
    const five = await times(7, () => h.get('/m/five', { 'x-user': 'counted' }));
    const ten = await times(12, () => h.get('/m/ten', { 'x-user': 'counted' }));
    expect(five.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect(ten.map((r) => r.status)).toEqual([...new Array(10).fill(200), 429, 429]);
    // Unlimited routes are not decisions.
    expect((await h.get('/m/free')).status).toBe(200);

    const scraped = await scrape(registry);
    expect(withoutBuckets(scraped)).toEqual({
      // Every kind is exported from the start, so rate() sees the first error.
      'rate_limit_backend_errors_total{kind="timeout"}': 0,
      'rate_limit_backend_errors_total{kind="unavailable"}': 0,
      'rate_limit_backend_errors_total{kind="error"}': 0,
      rate_limit_circuit_open: 0,
      rate_limit_insurance_in_force: 0,
      // No policy is onStoreFailure: 'local', so no count is given or learned.
      rate_limit_instances: 0,
      'rate_limit_decisions_total{scope="MetricsController.five",policy="default",outcome="allowed"}': 5,
      'rate_limit_decisions_total{scope="MetricsController.five",policy="default",outcome="blocked"}': 2,
      'rate_limit_decisions_total{scope="MetricsController.ten",policy="ten",outcome="allowed"}': 10,
      'rate_limit_decisions_total{scope="MetricsController.ten",policy="ten",outcome="blocked"}': 2,
      // Remaining < 20 % of the limit: 0 of 5; 1 and 0 of 10.
      'rate_limit_near_limit_total{scope="MetricsController.five",policy="default"}': 1,
      'rate_limit_near_limit_total{scope="MetricsController.ten",policy="ten"}': 2,
      // One store call per decided request.
      rate_limit_store_duration_seconds_count: 19,
      rate_limit_store_duration_seconds_sum: expect.any(Number),
    });
    expect(scraped['rate_limit_store_duration_seconds_sum']).toBeGreaterThan(0);
    // Buckets from 0.1 ms to 100 ms, cumulative, the last one holding every call.
    const buckets = Object.entries(scraped).filter(([name]) => name.includes('_bucket'));
    expect(buckets.map(([name]) => /le="([^"]+)"/.exec(name)![1])).toEqual(
      expect.arrayContaining(['0.0001', '0.001', '0.01', '0.1', '+Inf']),
    );
    expect(scraped['rate_limit_store_duration_seconds_bucket{le="+Inf"}']).toBe(19);
    // No label carries an identity or a request path; routes appear only as the scopes of
    // their policies, which come from the code.
    const text = await registry.metrics();
    expect(text).not.toContain('counted');
    expect(text).not.toContain('/m/');
    expect(new Set([...text.matchAll(/scope="([^"]*)"/g)].map((m) => m[1]))).toEqual(
      new Set(['MetricsController.five', 'MetricsController.ten']),
    );
  });

  it('shadow policies count as shadow_blocked, beside the enforced outcomes', async () => {
    const replies = await times(5, () => h.get('/m/shadow', { 'x-user': 'shadowed' }));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 429]);
    const scraped = await scrape(registry);
    const decisions = (policy: string, outcome: string) =>
      scraped[
        `rate_limit_decisions_total{scope="MetricsController.shadow",policy="${policy}",outcome="${outcome}"}`
      ];
    const near = (policy: string) =>
      scraped[`rate_limit_near_limit_total{scope="MetricsController.shadow",policy="${policy}"}`];
    expect({
      enforcedAllowed: decisions('enforced', 'allowed'),
      enforcedBlocked: decisions('enforced', 'blocked'),
      trialAllowed: decisions('trial', 'allowed'),
      // Decided only for the 4 requests `enforced` admitted: 2 admitted, 2 would-be refusals.
      trialShadowBlocked: decisions('trial', 'shadow_blocked'),
      enforcedNear: near('enforced'),
      trialNear: near('trial'),
      // 19 before, then 5 enforced calls and 4 shadow calls.
      storeCalls: scraped['rate_limit_store_duration_seconds_count'],
    }).toEqual({
      enforcedAllowed: 4,
      enforcedBlocked: 1,
      trialAllowed: 2,
      trialShadowBlocked: 2,
      enforcedNear: 1,
      trialNear: 1,
      storeCalls: 28,
    });
  });
});

describe('a stopped Redis in the metrics and decision events', () => {
  const registry = new Registry();
  const events: DecisionEvent[] = [];
  let server: RedisServerHandle;
  let h: AppHandle;

  beforeAll(async () => {
    server = await startRedisServer();
    h = await createApp(
      'express',
      {
        redis: server.url,
        algorithm: 'fixed-window',
        timeoutMs: 100,
        // Two failures open the circuit, and it stays open for the rest of the test.
        circuitBreaker: { failureThreshold: 2, cooldownMs: 600_000 },
        metrics: { registry },
        onDecision: (event) => events.push(event),
      },
      [MetricsController],
      { userFromHeader: true },
    );
  });
  afterAll(async () => {
    await h?.close();
    await server?.kill();
  });

  it('counts each failed store call by kind, shows the circuit open, and reports failed_open / failed_closed', async () => {
    expect((await h.get('/m/five', { 'x-user': 'outage' })).status).toBe(200);
    const client = h.app.get<Redis>(RATE_LIMIT_REDIS);
    await server.stop();
    // Real time: the client notices the closed connection.
    expect(await pollUntil(async () => client.status !== 'ready', 5000)).toBe(true);

    const statuses = [];
    for (const path of ['/m/five', '/m/closed', '/m/five', '/m/closed']) {
      statuses.push((await h.get(path, { 'x-user': 'outage' })).status);
    }
    expect(statuses).toEqual([200, 503, 200, 503]);

    expect(withoutBuckets(await scrape(registry))).toEqual({
      // The first two calls failed; the circuit then skipped the last two.
      'rate_limit_backend_errors_total{kind="timeout"}': 0,
      'rate_limit_backend_errors_total{kind="unavailable"}': 4,
      'rate_limit_backend_errors_total{kind="error"}': 0,
      rate_limit_circuit_open: 1,
      rate_limit_insurance_in_force: 0,
      // No policy is onStoreFailure: 'local', so no count is given or learned.
      rate_limit_instances: 0,
      'rate_limit_decisions_total{scope="MetricsController.five",policy="default",outcome="allowed"}': 1,
      // Only the call that answered is timed.
      rate_limit_store_duration_seconds_count: 1,
      rate_limit_store_duration_seconds_sum: expect.any(Number),
    });

    expect(events.map((e) => [e.route, e.outcome, e.allowed, e.policies.length])).toEqual([
      ['MetricsController.five', 'allowed', true, 1],
      ['MetricsController.five', 'failed_open', true, 0],
      ['MetricsController.closed', 'failed_closed', false, 0],
      ['MetricsController.five', 'failed_open', true, 0],
      ['MetricsController.closed', 'failed_closed', false, 0],
    ]);
    for (const event of events.slice(1)) {
      expect(event).toEqual({
        route: event.route,
        identity: hash('user:outage'),
        allowed: event.allowed,
        shadow: false,
        policies: [],
        cost: 1,
        durationMs: expect.any(Number),
        outcome: event.outcome,
      });
      // Failed calls end within timeoutMs (a skipped one at once).
      expect(event.durationMs).toBeGreaterThanOrEqual(0);
      expect(event.durationMs).toBeLessThan(100 + 50);
    }
  });
});

describe('onDecision', () => {
  const events: DecisionEvent[] = [];
  let h: AppHandle;

  beforeAll(async () => {
    h = await createApp(
      'express',
      { algorithm: 'fixed-window', onDecision: (event) => events.push(event) },
      [MetricsController],
      { userFromHeader: true },
    );
  });
  afterAll(() => h?.close());

  it('receives one event per evaluated request, in order, with exact fields', async () => {
    await times(6, () => h.get('/m/five', { 'x-user': 'alice' }));
    await h.get('/m/free', { 'x-user': 'alice' });
    await times(3, () => h.get('/m/shadow', { 'x-user': 'bob' }));

    expect(events).toHaveLength(9);
    const policy = (name: string, limit: number, remaining: number, allowed: boolean) => ({
      name,
      limit,
      remaining,
      allowed,
      resetMs: expect.any(Number),
      retryAfterMs: expect.any(Number),
      identity: expect.any(String),
      cost: 1,
      shadow: expect.any(Boolean),
    });
    const alice = (remaining: number, allowed: boolean) => ({
      route: 'MetricsController.five',
      identity: hash('user:alice'),
      allowed,
      shadow: false,
      policies: [{ ...policy('default', 5, remaining, allowed), shadow: false }],
      cost: 1,
      durationMs: expect.any(Number),
      outcome: allowed ? 'allowed' : 'blocked',
    });
    const bob = (remaining: number, trialRemaining: number, trialAllowed: boolean) => ({
      route: 'MetricsController.shadow',
      identity: hash('user:bob'),
      allowed: true,
      shadow: true,
      policies: [
        { ...policy('enforced', 4, remaining, true), shadow: false },
        { ...policy('trial', 2, trialRemaining, trialAllowed), shadow: true },
      ],
      cost: 1,
      durationMs: expect.any(Number),
      outcome: trialAllowed ? 'allowed' : 'shadow_blocked',
    });
    expect(events).toEqual([
      alice(4, true),
      alice(3, true),
      alice(2, true),
      alice(1, true),
      alice(0, true),
      alice(0, false),
      bob(3, 1, true),
      bob(2, 0, true),
      bob(1, 0, false),
    ]);
    for (const event of events) {
      expect(event.durationMs).toBeGreaterThan(0);
      expect(event.durationMs).toBeLessThan(2000);
      for (const p of event.policies) {
        expect(p.identity).toBe(event.identity);
        // Fixed window of one minute, opened by the first request.
        expect(p.resetMs).toBeGreaterThan(50_000);
        expect(p.resetMs).toBeLessThanOrEqual(60_000);
        expect(p.retryAfterMs).toBe(p.allowed ? 0 : p.resetMs);
      }
    }
    // The refused request's wait is the window's end.
    expect(events[5]!.policies[0]!.retryAfterMs).toBe(events[5]!.policies[0]!.resetMs);
  });
});

describe('a throwing onDecision', () => {
  const logger = new CapturingLogger();

  it.each([
    [
      'throws',
      () => {
        throw new Error('hook exploded');
      },
    ],
    ['rejects', () => Promise.reject(new Error('hook exploded')) as unknown as void],
  ])(
    'that %s changes no response, and is logged once as rate_limit.config_error',
    async (_, hook) => {
      const reference = await createApp(
        'express',
        { algorithm: 'fixed-window' },
        [MetricsController],
        {
          userFromHeader: true,
        },
      );
      const hooked = await createApp(
        'express',
        { algorithm: 'fixed-window', onDecision: hook },
        [MetricsController],
        { userFromHeader: true, logger },
      );
      logger.clear();
      try {
        const expected = await times(7, () => reference.get('/m/five', { 'x-user': 'carol' }));
        const got = await times(7, () => hooked.get('/m/five', { 'x-user': 'carol' }));
        const view = (r: (typeof got)[number]) => ({
          status: r.status,
          body: r.body,
          remaining: r.rl['x-ratelimit-remaining'],
        });
        expect(got.map(view)).toEqual(expected.map(view));
        expect(got.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429]);
        // A rejection is reported once its promise settles: within the next request at the latest.
        const lines = logger.matching('rate_limit.config_error');
        expect(lines).toHaveLength(1);
        expect(JSON.parse(lines[0]!.slice(lines[0]!.indexOf('{')))).toEqual({
          kind: 'onDecision',
          count: 1,
          route: 'onDecision',
          message: 'hook exploded',
          docs: 'docs/reference/errors.md#rate_limitconfig_error',
        });
      } finally {
        await reference.close();
        await hooked.close();
      }
    },
  );
});

describe('rate_limit.blocked', () => {
  const logger = new CapturingLogger();
  let h: AppHandle;

  beforeAll(async () => {
    h = await createApp('express', { algorithm: 'fixed-window' }, [MetricsController], {
      userFromHeader: true,
      logger,
    });
  });
  afterAll(() => h?.close());

  it('a flood from one client on one route logs one line, hashed, with the refusing policy', async () => {
    logger.clear();
    const replies = await times(25, () => h.get('/m/five', { 'x-user': 'flooder' }));
    expect(replies.filter((r) => r.status === 429)).toHaveLength(20);
    // Another client refused on the same route gets its own line.
    await times(6, () => h.get('/m/five', { 'x-user': 'other' }));
    const lines = logger.matching('rate_limit.blocked');
    expect(lines).toHaveLength(2);
    const details = lines.map(
      (l) => JSON.parse(l.slice(l.indexOf('{'))) as Record<string, unknown>,
    );
    expect(details).toEqual([
      {
        route: 'MetricsController.five',
        identity: hash('user:flooder'),
        policies: ['default'],
        cost: 1,
        retryAfterMs: expect.any(Number),
        count: 1,
      },
      {
        route: 'MetricsController.five',
        identity: hash('user:other'),
        policies: ['default'],
        cost: 1,
        retryAfterMs: expect.any(Number),
        count: 1,
      },
    ]);
    expect(details[0]!.retryAfterMs).toBeGreaterThan(50_000);
    expect(details[0]!.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect(lines.join('\n')).not.toContain('flooder');
  });
});

describe('bootstrap', () => {
  const missing = () => {
    const error = new Error("Cannot find package 'prom-client'") as Error & { code: string };
    error.code = 'ERR_MODULE_NOT_FOUND';
    return Promise.reject(error);
  };
  const quiet = { warn: () => undefined } as never;

  it('fails with ERR_RATE_LIMIT_PEER_DEPENDENCY, saying to install prom-client, when metrics is set and it cannot be loaded', async () => {
    const failure = await createResources({ store: 'memory', metrics: true }, quiet, missing).catch(
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(RateLimitConfigError);
    expect(failure).toMatchObject({ code: 'ERR_RATE_LIMIT_PEER_DEPENDENCY' });
    expect((failure as Error).message).toContain('npm install prom-client');
    expect((failure as Error).message).toContain("Cannot find package 'prom-client'");
  });

  it.each([undefined, false])(
    'with metrics %s, prom-client is never loaded: bootstrap succeeds with a loader that would fail',
    async (metrics) => {
      const resources = await createResources({ store: 'memory', metrics }, quiet, missing);
      expect(resources.metrics).toBeUndefined();
      await resources.store.close?.();
    },
  );

  it('without the metrics option, serving traffic registers nothing in prom-client', async () => {
    const h = await createApp('express', {}, [MetricsController], { userFromHeader: true });
    try {
      expect((await h.get('/m/five', { 'x-user': 'plain' })).status).toBe(200);
      expect(globalRegister.getSingleMetric('rate_limit_decisions_total')).toBeUndefined();
      expect(await globalRegister.metrics()).not.toContain('rate_limit_');
    } finally {
      await h.close();
    }
  });

  it('a started app exports every backend error kind at 0 before any request, so rate() sees the first error', async () => {
    const registry = new Registry();
    const h = await createApp('express', { metrics: { registry } }, [MetricsController]);
    try {
      const scraped = await scrape(registry, 'rate_limit_backend_errors_total');
      expect(scraped).toEqual({
        'rate_limit_backend_errors_total{kind="timeout"}': 0,
        'rate_limit_backend_errors_total{kind="unavailable"}': 0,
        'rate_limit_backend_errors_total{kind="error"}': 0,
      });
    } finally {
      await h.close();
    }
  });

  it('metrics: true registers in the global registry until shutdown; a second module on it at the same time fails the start', async () => {
    const first = await createApp('express', { metrics: true }, [MetricsController]);
    try {
      expect((await first.get('/m/five')).status).toBe(200);
      expect(
        samples(await globalRegister.metrics()).get(
          'rate_limit_decisions_total{scope="MetricsController.five",policy="default",outcome="allowed"}',
        ),
      ).toBe(1);
      const clash = await bootstrap(
        'express',
        rootModule({ store: 'memory', metrics: true }, [MetricsController]),
      ).catch((error: unknown) => error);
      expect(clash).toBeInstanceOf(RateLimitConfigError);
      expect(clash).toMatchObject({ code: 'ERR_RATE_LIMIT_OPTION' });
      expect((clash as Error).message).toContain(
        'rate_limit_decisions_total is already registered',
      );
    } finally {
      await first.close();
    }
    expect(await globalRegister.metrics()).not.toContain('rate_limit_');
    // Another prefix on the same registry is fine.
    const prefixed = await createApp('express', { metrics: { prefix: 'api_rl_' } }, [
      MetricsController,
    ]);
    try {
      await prefixed.get('/m/five');
      expect(
        samples(await globalRegister.metrics()).get(
          'api_rl_decisions_total{scope="MetricsController.five",policy="default",outcome="allowed"}',
        ),
      ).toBe(1);
    } finally {
      await prefixed.close();
    }
    expect(await globalRegister.metrics()).not.toContain('api_rl_');
  });

  it.each([
    [{ metrics: 'yes' }, 'invalid metrics "yes": expected a boolean or { registry?, prefix? }'],
    [{ metrics: { prefix: 'bad-prefix' } }, 'invalid metrics.prefix "bad-prefix"'],
    [{ metrics: { registry: {} } }, 'invalid metrics.registry: expected a prom-client Registry'],
    [{ onDecision: 'log' }, 'invalid onDecision "log": expected a function'],
  ])('rejects %j', async (options, message) => {
    const failure = await createResources(
      { store: 'memory', ...(options as object) },
      quiet,
      missing,
    ).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(RateLimitConfigError);
    expect(failure).toMatchObject({ code: 'ERR_RATE_LIMIT_OPTION' });
    expect((failure as Error).message).toContain(message);
  });
});
