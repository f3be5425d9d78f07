/**
 * Observation (`onDecision`, metrics, a span) wraps a route's stages and no longer takes its
 * requests off the fast path (issue 21): the plan runs the same stages with or without it,
 * and an observed request makes no more promises than an unobserved one but the one that
 * reports it. Before, observing sent every request down the general path: async functions
 * and several extra promises per request.
 */
import 'reflect-metadata';
import { createHook } from 'node:async_hooks';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
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

@Controller()
class ItemsController {
  @Get('items')
  @RateLimit('1000/m')
  items() {
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

/** An HTTP call of `ItemsController.items` from one address. */
function callOf(): ExecutionContextHost {
  const request = { ip: '192.0.2.7', headers: {}, socket: { remoteAddress: '192.0.2.7' } };
  const response = { setHeader: () => undefined };
  const ctx = new ExecutionContextHost(
    [request, response],
    ItemsController,
    ItemsController.prototype.items,
  );
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
