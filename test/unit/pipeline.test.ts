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
import { Controller, Get, UseGuards, type CanActivate } from '@nestjs/common';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { Test } from '@nestjs/testing';
import {
  RateLimit,
  RateLimitGuard,
  RateLimitModule,
  type DecisionEvent,
  type RateLimitModuleOptions,
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
    expect(stagesOf(plain.planner)).toEqual([
      'gate',
      'identify',
      'entries',
      'enforce',
      'store-failure',
      'shape',
      'deliver',
    ]);
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

  it('a cost function and a shadow policy add the shadow stage; the path is the general one', () => {
    expect(app.planner.planOf(callOf(ItemsController.prototype.search)).stages).toEqual([
      'gate',
      'identify',
      'entries',
      'enforce',
      'store-failure',
      'shadow',
      'shape',
      'deliver',
    ]);
  });

  it('a route with guards of its own defers its per-user policy behind them', () => {
    const plan = app.planner.planOf(callOf(ItemsController.prototype.mine));
    expect(plan.stages).toEqual([
      'gate',
      'identify',
      'entries',
      'enforce',
      'store-failure',
      'shape',
      'deliver',
      'defer',
      'identify',
      'entries',
      'enforce',
      'store-failure',
      'shape',
      'deliver',
    ]);
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
