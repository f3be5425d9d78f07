/**
 * Outside HTTP (issue 3, build points 1 and 3): contexts no adapter serves pass the guard untouched,
 * and RateLimitService serves jobs and other providers with the app's store and prefix.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Inject, Injectable, type ExecutionContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { RateLimit, RateLimitGuard, RateLimitService, type Decision } from '../../lib/index.js';
import { disconnect, newRedis } from '../harness/redis.js';
import { createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

@Controller('jobs')
class JobsController {
  @Get('hit')
  @RateLimit('3/m')
  hit() {
    return 'ok';
  }
}

/** A provider that limits work that is not an HTTP request. */
@Injectable()
class ExportJobs {
  constructor(@Inject(RateLimitService) private readonly limits: RateLimitService) {}

  run(tenant: string): Promise<Decision> {
    return this.limits.consume(
      `tenant:${tenant}`,
      { name: 'exports', rate: '2/h' },
      { scope: 'exports' },
    );
  }

  left(tenant: string): Promise<Decision> {
    return this.limits.peek(
      `tenant:${tenant}`,
      { name: 'exports', rate: '2/h' },
      { scope: 'exports' },
    );
  }
}

/** An ExecutionContext of another transport; any HTTP access fails the test. */
function fakeContext(type: string): ExecutionContext {
  const http = () => {
    throw new Error(`the guard touched the HTTP context of a ${type} call`);
  };
  return {
    getType: () => type,
    switchToHttp: http,
    switchToRpc: () => ({ getData: () => ({}), getContext: () => ({}) }),
    switchToWs: () => ({ getData: () => ({}), getClient: () => ({}) }),
    getClass: () => JobsController,
    getHandler: () => JobsController.prototype.hit,
    getArgs: () => [{}, {}],
    getArgByIndex: () => ({}),
  } as unknown as ExecutionContext;
}

let redis: Redis;
beforeAll(() => {
  redis = newRedis();
});
afterAll(() => disconnect(redis));

describe.each(PLATFORMS)('outside HTTP on %s', (platform) => {
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(platform, {}, [JobsController], {
      userFromHeader: true,
      providers: [ExportJobs],
    });
  });
  afterAll(() => h?.close());

  // RPC, WebSocket and GraphQL are limited (test/transports/); a context type no adapter
  // serves is not.
  it.each(['webhook', 'kafka-streams'])(
    'the guard lets a %s context through untouched',
    async (type) => {
      const guard = h.app.get(RateLimitGuard);
      // Many calls: a limited context would be refused after 3.
      for (let i = 0; i < 5; i++)
        await expect(guard.canActivate(fakeContext(type))).resolves.toBe(true);
    },
  );

  it('RateLimitService in a provider consumes and peeks outside HTTP', async () => {
    const jobs = h.app.get(ExportJobs);
    expect((await jobs.left('acme')).policies[0]).toMatchObject({
      allowed: true,
      remaining: 2,
      limit: 2,
    });
    const runs = [await jobs.run('acme'), await jobs.run('acme'), await jobs.run('acme')];
    expect(runs.map((d) => d.allowed)).toEqual([true, true, false]);
    expect(runs[2]).toMatchObject({ allowed: false, reason: 'limit_exceeded' });
    // Peeking spends nothing.
    expect((await jobs.left('acme')).policies[0]).toMatchObject({ remaining: 0 });
    expect((await jobs.left('acme')).policies[0]).toMatchObject({ remaining: 0 });
    expect((await jobs.left('globex')).policies[0]).toMatchObject({ remaining: 2 });
    // Same store and prefix as the guard.
    const keys = await redis.keys(`${h.prefix}:{tenant:acme}:*`);
    expect(keys).toEqual([
      expect.stringMatching(new RegExp(`^${h.prefix}:\\{tenant:acme\\}:exports:exports:`)),
    ]);
  });

  it("RateLimitService shares budgets with the guard: spending a route's scope shows in its headers", async () => {
    const service = h.app.get(RateLimitService);
    await service.consume('user:shared', { rate: '3/m' }, { scope: 'JobsController.hit', cost: 2 });
    const replies = await times(2, () => h.get('/jobs/hit', { 'x-user': 'shared' }));
    expect(replies.map((r) => r.status)).toEqual([200, 429]);
    expect(replies[0]!.headers.get('x-ratelimit-remaining')).toBe('0');
    await service.reset('user:shared');
    expect((await h.get('/jobs/hit', { 'x-user': 'shared' })).status).toBe(200);
  });
});
