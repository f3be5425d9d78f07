/**
 * The request pipeline compiled per route (DESIGN §12, issue 21): each route's plan lists the
 * stages it runs; observation (`onDecision`, metrics, a span) wraps them and no longer takes
 * a request off the fast path (an observed request makes no more promises than an unobserved
 * one but the one that reports it; before, observing sent every request down the general
 * path, with async functions and several more promises per request); and a module has one
 * events object, shared by every part that logs.
 */
import 'reflect-metadata';
import { createHook } from 'node:async_hooks';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Injectable,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { Test } from '@nestjs/testing';
import {
  RateLimit,
  RateLimitGuard,
  RateLimitModule,
  type DecisionEvent,
  type RateLimitModuleOptions,
  type RateLimitStore,
  type RequestOutcome,
} from '../../lib/index.js';
import { RoutePlanner } from '../../lib/nest/plan/planner.js';
import { RateLimitEvents } from '../../lib/nest/observability/events.js';
import { RateLimitService, keys } from '../../lib/index.js';

const AUTH: CanActivate = { canActivate: () => true };

@Controller()
class ItemsController {
  @Get('items')
  @RateLimit('1000/m')
  items() {
    return 'ok';
  }

  @Get('mine')
  @UseGuards(AUTH)
  @RateLimit('10/m', { name: 'address', key: keys.ip })
  @RateLimit('100/m', { name: 'user', key: keys.user() })
  mine() {
    return 'ok';
  }

  @Get('search')
  @RateLimit('60/m', { cost: () => 2 })
  @RateLimit('600/m', { name: 'trial', shadow: true })
  search() {
    return 'ok';
  }
}

async function guardOf(options: RateLimitModuleOptions) {
  const moduleRef = await Test.createTestingModule({
    imports: [RateLimitModule.forRoot({ store: 'memory', tracing: false, ...options })],
    controllers: [ItemsController],
  }).compile();
  await moduleRef.init();
  return { moduleRef, guard: moduleRef.get(RateLimitGuard), planner: moduleRef.get(RoutePlanner) };
}

/** The stages of a route with fixed policies, as a call meets them. */
const STEP = [
  'gate',
  'identify',
  'entries',
  'enforce',
  'store-failure',
  'shape',
  'deliver',
] as const;

/** An HTTP call of a handler of `ItemsController` from one address. */
function callOf(handler: () => string = ItemsController.prototype.items): ExecutionContextHost {
  const request = { ip: '192.0.2.7', headers: {}, socket: { remoteAddress: '192.0.2.7' } };
  const response = { setHeader: () => undefined };
  const ctx = new ExecutionContextHost([request, response], ItemsController, handler);
  ctx.setType('http');
  return ctx;
}

/** Promises created while the guard decides one call, the call's own awaits included. */
async function promisesPerCall(guard: RateLimitGuard): Promise<number> {
  let created = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE') created++;
    },
  });
  // Warm: the first call compiles nothing (bootstrap did), but loads lazily what it needs.
  await guard.canActivate(callOf());
  hook.enable();
  await guard.canActivate(callOf());
  hook.disable();
  return created;
}

describe('observation stays on the fast path', () => {
  const events: DecisionEvent[] = [];
  let plain: Awaited<ReturnType<typeof guardOf>>;
  let observed: Awaited<ReturnType<typeof guardOf>>;
  beforeAll(async () => {
    plain = await guardOf({});
    observed = await guardOf({ onDecision: (event) => void events.push(event) });
  });
  afterAll(async () => {
    await plain?.moduleRef.close();
    await observed?.moduleRef.close();
  });

  it('the observed plan runs the same stages, with observation around them', () => {
    const stagesOf = (p: RoutePlanner) => p.planOf(callOf()).stages;
    expect(stagesOf(plain.planner)).toEqual(STEP);
    expect(stagesOf(observed.planner)).toEqual(['observe', ...stagesOf(plain.planner)]);
  });

  it('an observed request makes at most one more promise than an unobserved one, and is reported', async () => {
    const unobserved = await promisesPerCall(plain.guard);
    events.length = 0;
    const withObserver = await promisesPerCall(observed.guard);
    expect(withObserver - unobserved).toBeLessThanOrEqual(1);
    expect(withObserver - unobserved).toBeGreaterThanOrEqual(0);
    expect(events).toHaveLength(2);
    expect(events[1]).toMatchObject({
      route: 'ItemsController.items',
      allowed: true,
      outcome: 'allowed',
      cost: 1,
      policies: [expect.objectContaining({ name: 'default', limit: 1000, remaining: 998 })],
    });
  });
});

describe('the stages of a plan are chosen per route', () => {
  let app: Awaited<ReturnType<typeof guardOf>>;
  beforeAll(async () => {
    app = await guardOf({});
  });
  afterAll(() => app?.moduleRef.close());

  it('a shadow policy adds the shadow stage, after the enforced decision is shaped', () => {
    expect(app.planner.planOf(callOf(ItemsController.prototype.search)).stages).toEqual([
      ...STEP.slice(0, 6),
      'shadow',
      'deliver',
    ]);
  });

  it('a route with guards of its own defers its per-user policy behind them', () => {
    const plan = app.planner.planOf(callOf(ItemsController.prototype.mine));
    // The user step after the route's guards runs every stage but the gate again.
    expect(plan.stages).toEqual([...STEP, 'defer', ...STEP.slice(1)]);
    expect(plan.route.enforced.map((r) => r.name)).toEqual(['address']);
    expect(plan.route.afterGuards?.enforced.map((r) => r.name)).toEqual(['user']);
    expect(plan.deferred).toBeDefined();
  });

  it('one events object serves the module: the planner, the guard and the service log through it', () => {
    const events = app.moduleRef.get(RateLimitEvents);
    expect(events).toBeInstanceOf(RateLimitEvents);
    expect(app.planner.events).toBe(events);
    expect(app.planner.engine.events).toBe(events);
    expect(app.moduleRef.get(RateLimitService)).toBeInstanceOf(RateLimitService);
  });
});

/** A guard of an app's own, as the README shows: its `refuse` reads what the outcome holds. */
@Injectable()
class RecordingGuard extends RateLimitGuard {
  static seen: {
    body: unknown;
    problem: unknown;
    status: number;
    prefix: unknown;
    headers?: Record<string, string>;
  }[] = [];

  protected override refuse(ctx: ExecutionContext, outcome: RequestOutcome): never {
    const refusal = outcome.refusal!;
    RecordingGuard.seen.push({
      body: refusal.body,
      problem: refusal.problem,
      status: refusal.status,
      // The module's options, as a subclass reached them before the pipeline.
      prefix: this.runtime.options.prefix,
      ...(refusal.status === 503 && { headers: { ...outcome.headers } }),
    });
    // A refuse of your own may add a header of its own.
    outcome.headers['X-Refused-By'] = 'recording';
    return super.refuse(ctx, outcome);
  }
}

@Controller()
class ScarceController {
  @Get('scarce')
  @RateLimit('1/m')
  scarce() {
    return 'ok';
  }

  @Get('closed')
  @RateLimit('100/m', { failClosed: true })
  closed() {
    return 'ok';
  }
}

async function recordingApp(options: RateLimitModuleOptions) {
  const moduleRef = await Test.createTestingModule({
    imports: [
      RateLimitModule.forRoot({ tracing: false, prefix: 'rec', guard: RecordingGuard, ...options }),
    ],
    controllers: [ScarceController],
  }).compile();
  await moduleRef.init();
  return { moduleRef, guard: moduleRef.get(RecordingGuard) };
}

function scarceCall(handler: () => string): ExecutionContextHost {
  const request = { ip: '192.0.2.9', headers: {}, socket: { remoteAddress: '192.0.2.9' } };
  const ctx = new ExecutionContextHost(
    [request, { setHeader: () => undefined }],
    ScarceController,
    handler,
  );
  ctx.setType('http');
  return ctx;
}

describe('a guard subclass keeps what it read before the pipeline', () => {
  it('refuse reads refusal.body and refusal.problem as before, and this.runtime.options', async () => {
    RecordingGuard.seen = [];
    for (const errorFormat of [undefined, 'problem'] as const) {
      const { moduleRef, guard } = await recordingApp({ store: 'memory', errorFormat });
      await guard.canActivate(scarceCall(ScarceController.prototype.scarce));
      await expect(
        guard.canActivate(scarceCall(ScarceController.prototype.scarce)),
      ).rejects.toMatchObject({ status: 429 });
      await moduleRef.close();
    }
    expect(RecordingGuard.seen).toEqual([
      {
        body: {
          statusCode: 429,
          error: 'Too Many Requests',
          message: 'Too many requests; retry in 60 s',
          retryAfter: 60,
        },
        problem: undefined,
        status: 429,
        prefix: 'rec',
      },
      {
        body: expect.objectContaining({ statusCode: 429, retryAfter: 60 }),
        problem: expect.objectContaining({
          status: 429,
          'violated-policies': ['default'],
          retryAfter: 60,
        }),
        status: 429,
        prefix: 'rec',
      },
    ]);
  });

  it('a fail-closed 503 is a new outcome each time: refuse may add to its headers, and the next starts clean', async () => {
    RecordingGuard.seen = [];
    const down: RateLimitStore = {
      consume: () => Promise.reject(new Error('store down')),
      deleteByPrefix: () => Promise.reject(new Error('store down')),
    };
    const { moduleRef, guard } = await recordingApp({ store: down, timeoutMs: 50 });
    const refusals: unknown[] = [];
    for (let i = 0; i < 2; i++) {
      refusals.push(
        await guard
          .canActivate(scarceCall(ScarceController.prototype.closed))
          .catch((error: { getStatus(): number; getResponse(): unknown }) => [
            error.getStatus(),
            error.getResponse(),
          ]),
      );
    }
    await moduleRef.close();
    const unavailable = [
      503,
      {
        statusCode: 503,
        error: 'Service Unavailable',
        message: 'Rate limiting is unavailable; retry shortly',
        retryAfter: 1,
      },
    ];
    expect(refusals).toEqual([unavailable, unavailable]);
    // The header the first refuse added is not on the second refusal.
    expect(RecordingGuard.seen.map((s) => s.headers)).toEqual([
      { 'Retry-After': '1' },
      { 'Retry-After': '1' },
    ]);
  });
});

describe('WebSocket connection limits keep a bounded number of plans', () => {
  it('300 scopes compile 300 plans, of which the last 256 are kept', async () => {
    const { moduleRef } = await guardOf({});
    const service = moduleRef.get(RateLimitService);
    for (let i = 0; i < 300; i++) {
      expect(await service.limitConnection({}, '10/m', { scope: `room-${i}` })).toBe(true);
    }
    const plans = (service as unknown as { connections: { plans: Map<string, unknown> } })
      .connections.plans;
    expect(plans.size).toBe(256);
    expect([...plans.keys()][0]).toBe(JSON.stringify(['10/m', 'room-44', null, null]));
    await moduleRef.close();
  });
});
