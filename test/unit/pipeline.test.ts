/**
 * The request pipeline compiled per route (DESIGN §12, issues 21 and 35): each route's plan
 * holds the stages it runs, and runs exactly those; observation (`onDecision`, metrics, a span) wraps them and no longer takes
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
  definePolicy,
  MemoryStore,
  RateLimit,
  RateLimitGuard,
  RateLimitModule,
  type DecisionEvent,
  type RateLimitModuleOptions,
  type RateLimitStore,
  type RequestOutcome,
  type StoreOutcome,
  type StorePolicy,
} from '../../lib/index.js';
import type { CompiledStep } from '../../lib/nest/pipeline/call.js';
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

/** The stages of a route with fixed policies, as its plan runs them (after gate and identify). */
const STEP = ['entries', 'enforce', 'store-failure', 'shape'] as const;

/** The names of the stages a compiled step runs, in order. */
const namesOf = (step: CompiledStep | undefined) => step?.stages.map((s) => s.name);

/** An HTTP call of a handler of `ItemsController` from one address. */
function callOf(handler: () => string = ItemsController.prototype.items): ExecutionContextHost {
  const request = { ip: '192.0.2.7', headers: {}, socket: { remoteAddress: '192.0.2.7' } };
  const response = { setHeader: () => undefined };
  const ctx = new ExecutionContextHost([request, response], ItemsController, handler);
  ctx.setType('http');
  return ctx;
}

/** Promises created while `run` runs once (warmed first), its own awaits included. */
async function promisesOf(run: () => Promise<unknown>): Promise<number> {
  await run();
  let created = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE') created++;
    },
  });
  hook.enable();
  await run();
  hook.disable();
  return created;
}

/** Promises created while the guard decides one call, the call's own awaits included. */
function promisesPerCall(guard: RateLimitGuard): Promise<number> {
  // Warm: the first call compiles nothing (bootstrap did), but loads lazily what it needs.
  return promisesOf(() => guard.canActivate(callOf()));
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
    const stagesOf = (p: RoutePlanner) => namesOf(p.planOf(callOf()));
    expect(stagesOf(plain.planner)).toEqual(STEP);
    expect(stagesOf(observed.planner)).toEqual(['observe', ...STEP]);
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

/** A memory store that counts its `consume` calls: one per decision is the invariant. */
class CountingStore extends MemoryStore {
  consumed = 0;
  override consume(policies: readonly StorePolicy[]): Promise<StoreOutcome[]> {
    this.consumed++;
    return super.consume(policies);
  }
}

describe('the fast path, as its plan holds it', () => {
  let app: Awaited<ReturnType<typeof guardOf>>;
  const store = new CountingStore({ sweepIntervalMs: 0 });
  beforeAll(async () => {
    app = await guardOf({ store });
  });
  afterAll(() => app?.moduleRef.close());

  it('a route with fixed policies runs no async function, and makes one store call', async () => {
    const plan = app.planner.planOf(callOf());
    expect(namesOf(plan)).toEqual(STEP);
    // An async function is an AsyncFunction: every stage on this path is a plain one.
    expect(plan.stages.map((s) => s.run.constructor.name)).toEqual(STEP.map(() => 'Function'));
    const before = store.consumed;
    await expect(app.guard.canActivate(callOf())).resolves.toBe(true);
    expect(store.consumed - before).toBe(1);
  });

  it('the guard makes three promises over those of the store call: its own two, and the one that reads the answer', async () => {
    const policy = definePolicy({ name: 'default', rate: '1000/m' });
    const entry = { identity: 'ip:192.0.2.8', policy, cost: 1, scope: 'global' };
    const storeCall = await promisesOf(() => app.planner.limiter.consumeEach([entry]));
    const guarded = await promisesOf(() => app.guard.canActivate(callOf()));
    // Before the plans were compiled into stages, the same: an async function on this path
    // would add at least one (its own promise), and a microtask turn per await.
    expect(guarded - storeCall).toBe(3);
  });
});

describe('the stages of a plan are chosen per route', () => {
  let app: Awaited<ReturnType<typeof guardOf>>;
  beforeAll(async () => {
    app = await guardOf({});
  });
  afterAll(() => app?.moduleRef.close());

  it('a shadow policy adds the shadow stage, after the enforced decision is shaped', () => {
    expect(namesOf(app.planner.planOf(callOf(ItemsController.prototype.search)))).toEqual([
      ...STEP,
      'shadow',
    ]);
  });

  it('a route with guards of its own defers its per-user policy behind them', () => {
    const plan = app.planner.planOf(callOf(ItemsController.prototype.mine));
    // Defer runs around the first step; then the address budgets, before the route's guards,
    // and the user step after them run their own stages.
    expect(namesOf(plan)).toEqual(['defer', ...STEP]);
    expect(namesOf(plan.deferred?.address)).toEqual(STEP);
    expect(namesOf(plan.deferred?.user)).toEqual(STEP);
    expect(plan.route.enforced.map((r) => r.name)).toEqual(['address']);
    expect(plan.route.afterGuards?.enforced.map((r) => r.name)).toEqual(['user']);
    expect(plan.deferred).toBeDefined();
  });

  it('one events object serves the module: the planner, the guard and the service log through it', () => {
    const events = app.moduleRef.get(RateLimitEvents);
    expect(events).toBeInstanceOf(RateLimitEvents);
    expect(app.planner.events).toBe(events);
    expect(app.planner.services.events).toBe(events);
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
      // The module's options, as a subclass reached them before the pipeline (`runtime`,
      // deprecated: the same object as `planner`).
      prefix: this.runtime === this.planner ? this.planner.options.prefix : 'not the planner',
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
