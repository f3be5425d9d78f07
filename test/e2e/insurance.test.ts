/**
 * Insurance limits (issue 16): `onStoreFailure: 'local'` with `instances: 2`. While Redis is
 * stopped, each of two apps (two Nest apps in this process, each with its own memory) admits
 * its share ceil(5 / 2) = 3 of a `5/m` quota, then answers 429 with `Retry-After`; no 5xx.
 * Once Redis is back, both decide on the shared budget again, without a restart.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import {
  CapturingLogger,
  createApp,
  pollUntil,
  times,
  uniquePrefix,
  type AppHandle,
} from './support/app.js';
import { InsuredController } from './support/insured-controller.js';

const TIMEOUT_MS = 100;

describe('insurance limits while Redis is stopped', () => {
  let server: RedisServerHandle;
  const apps: AppHandle[] = [];
  // The first app's metrics: rate_limit_insurance_in_force says when local limits decide.
  const registry = new Registry();
  const inForce = async () =>
    (await registry.getSingleMetric('rate_limit_insurance_in_force')!.get()).values[0]!.value;
  // One logger for both: Nest's Logger is process-wide, the last app's logger takes all lines.
  const logger = new CapturingLogger();

  beforeAll(async () => {
    server = await startRedisServer();
    const prefix = uniquePrefix(); // one shared budget: the same prefix on one Redis
    for (let i = 0; i < 2; i++) {
      apps.push(
        await createApp(
          'express',
          {
            redis: server.url,
            prefix,
            instances: 2,
            timeoutMs: TIMEOUT_MS,
            circuitBreaker: { failureThreshold: 2, cooldownMs: 200 },
            ...(i === 0 && { metrics: { registry } }),
          },
          [InsuredController],
          { logger, userFromHeader: true },
        ),
      );
    }
  });
  afterAll(async () => {
    await Promise.all(apps.map((h) => h.close()));
    await server?.kill();
  });

  it('with Redis up, the two apps share one budget of 5', async () => {
    const replies = await Promise.all(
      apps.map((h) => times(3, () => h.get('/insured', { 'x-user': 'shared' }))),
    );
    const statuses = replies.flat().map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(1);
    expect(replies.flat().map((r) => r.headers.get('x-ratelimit-limit'))).toEqual(
      new Array(6).fill('5'),
    );
  });

  it('with Redis stopped, each app admits at most ceil(5 / 2) = 3 of 20, then 429 with Retry-After; no 5xx', async () => {
    expect(await inForce()).toBe(0);
    await server.kill();
    logger.clear();
    const admitted: number[] = [];
    for (const h of apps) {
      const replies = await times(20, () => h.get('/insured', { 'x-user': 'outage' }));
      const statuses = replies.map((r) => r.status);
      admitted.push(statuses.filter((s) => s === 200).length);
      expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
      expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
      expect(statuses.slice(3)).toEqual(new Array(17).fill(429));
      // Honest headers: the local share, and the wait of the local window.
      expect(replies.map((r) => r.headers.get('x-ratelimit-limit'))).toEqual(
        new Array(20).fill('3'),
      );
      expect(replies.slice(0, 3).map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual([
        '2',
        '1',
        '0',
      ]);
      for (const refused of replies.slice(3)) {
        const retryAfter = Number(refused.headers.get('retry-after'));
        expect(retryAfter).toBeGreaterThanOrEqual(1);
        expect(retryAfter).toBeLessThanOrEqual(60);
        expect(refused.body).toMatchObject({ statusCode: 429, retryAfter });
      }
    }
    console.log(
      `insurance figures: admitted per process with Redis stopped ${admitted.join(', ')} of 20 each`,
    );
    expect(admitted).toEqual([3, 3]);
    expect(await inForce()).toBe(1);
    // Throttled per route in each app: one line each for its 20 requests.
    const lines = logger.matching('rate_limit.insurance');
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).toContain('"instances":2');
  });

  it('once Redis is back, the shared budget applies again (local state dropped)', async () => {
    await server.restart();
    // Reconnection takes a moment: a request decided by Redis carries limit 5.
    const back = await Promise.all(
      apps.map((h, i) =>
        pollUntil(
          async () =>
            (await h.get('/insured', { 'x-user': `probe-${i}` })).headers.get(
              'x-ratelimit-limit',
            ) === '5',
          10_000,
        ),
      ),
    );
    expect(back).toEqual([true, true]);
    expect(await inForce()).toBe(0);
    // The restarted Redis kept nothing (no persistence): a fresh budget of 5, shared.
    const replies = [];
    for (let i = 0; i < 10; i++)
      replies.push(await apps[i % 2]!.get('/insured', { 'x-user': 'outage' }));
    expect(replies.map((r) => r.status)).toEqual([
      200, 200, 200, 200, 200, 429, 429, 429, 429, 429,
    ]);
    expect(replies.map((r) => r.headers.get('x-ratelimit-limit'))).toEqual(new Array(10).fill('5'));
  });
});
