/**
 * Insurance limits across OS processes (issue 16): two Nest apps, each in a process of its
 * own (test/e2e/support/insured-worker.ts), share one private redis-server and a `5/m` route
 * with `onStoreFailure: 'local'`. With `instances: 2` given, or learned from the store: Redis
 * stopped under traffic, each process admits at most ceil(5 / 2) = 3 of 20, then 429 with an
 * honest `Retry-After`, never a 5xx; Redis back, the budget in Redis decides again. Learned: a
 * process whose peer stops announcing learns 1, and then keeps the whole limit to itself.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import type { RateLimitModuleOptions } from '../../lib/index.js';
import { redisCall } from '../harness/global-setup.js';
import { startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import {
  bootstrap,
  createApp,
  pollUntil,
  rootModule,
  times,
  uniquePrefix,
  type Reply,
} from './support/app.js';
import { AppProcess } from './support/app-process.js';
import { InsuredController } from './support/insured-controller.js';

const WORKER = fileURLToPath(new URL('./support/insured-worker.ts', import.meta.url));

/** A worker process serving the insured route; see insured-worker.ts. */
class Worker {
  private constructor(private readonly app: AppProcess) {}

  static async start(options: RateLimitModuleOptions): Promise<Worker> {
    return new Worker(await AppProcess.start(WORKER, options));
  }

  get(user: string): Promise<Reply> {
    return this.app.get('/insured', { 'x-user': user });
  }

  /** A gauge of this process's metrics, read from its /metrics. */
  async gauge(name: string): Promise<number> {
    const text = (await this.app.get('/metrics')).body as string;
    return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  }

  stop(crash = false): Promise<void> {
    return this.app.stop(crash);
  }
}

const OPTIONS = {
  timeoutMs: 100,
  circuitBreaker: { failureThreshold: 2, cooldownMs: 200 },
} satisfies RateLimitModuleOptions;

/**
 * 20 requests as `user` to `worker` with the store down: the statuses, and the checks every
 * refusal must pass (a local 5/m window: `Retry-After` at most 60 s and no less than what is
 * left of the window that opened with the first admitted request).
 */
async function twentyWhileDown(worker: Worker, user: string, share: number): Promise<number> {
  const opened = performance.now();
  const replies = await times(20, () => worker.get(user));
  const elapsedS = (performance.now() - opened) / 1000;
  const statuses = replies.map((r) => r.status);
  expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
  expect(statuses).toEqual([...new Array(share).fill(200), ...new Array(20 - share).fill(429)]);
  expect(replies.map((r) => r.headers.get('x-ratelimit-limit'))).toEqual(
    new Array(20).fill(String(share)),
  );
  for (const refused of replies.slice(share)) {
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(retryAfter).toBeGreaterThanOrEqual(Math.ceil(60 - elapsedS));
    expect(refused.body).toMatchObject({ statusCode: 429, retryAfter });
  }
  return statuses.filter((s) => s === 200).length;
}

/** Requests `user` to each worker in turn (`n` in all) while `stop()` is false; the statuses. */
async function background(workers: Worker[], user: string, stop: () => boolean) {
  const statuses: number[] = [];
  for (let i = 0; !stop(); i++)
    statuses.push((await workers[i % workers.length]!.get(user)).status);
  return statuses;
}

/** Both workers answer from Redis again: a request of a fresh identity carries limit 5. */
async function backOnRedis(workers: Worker[]): Promise<boolean[]> {
  return Promise.all(
    workers.map((w, i) =>
      pollUntil(
        async () =>
          (await w.get(`probe-${i}-${performance.now()}`)).headers.get('x-ratelimit-limit') === '5',
        15_000,
      ),
    ),
  );
}

/**
 * A private redis-server and two worker processes on it, sharing `prefix`, with `options`;
 * both stopped after the tests of the enclosing describe.
 */
function twoWorkers(options: RateLimitModuleOptions) {
  const state = { server: undefined as unknown as RedisServerHandle, workers: [] as Worker[] };
  const prefix = uniquePrefix();
  beforeAll(async () => {
    state.server = await startRedisServer();
    state.workers = await Promise.all(
      [0, 1].map(() => Worker.start({ ...OPTIONS, ...options, redis: state.server.url, prefix })),
    );
  }, 60_000);
  afterAll(async () => {
    await Promise.all(state.workers.map((w) => w.stop()));
    await state.server?.kill();
  });
  return { state, prefix };
}

describe('insurance limits across two OS processes, instances: 2 given', () => {
  const { state, prefix } = twoWorkers({ instances: 2 });

  it('Redis stopped under traffic: each process admits 3 of 20, then 429 with Retry-After; no 5xx; Redis back, the shared budget decides', async () => {
    const { server, workers } = state;
    // Healthy: one budget of 5 across both processes.
    const shared = await Promise.all(workers.map((w) => times(3, () => w.get('shared'))));
    expect(shared.flat().filter((r) => r.status === 200)).toHaveLength(5);

    let stop = false;
    const traffic = background(workers, 'background', () => stop);
    await server.kill();
    const admitted: number[] = [];
    for (const w of workers) admitted.push(await twentyWhileDown(w, 'outage', 3));
    expect(await Promise.all(workers.map((w) => w.gauge('rate_limit_insurance_in_force')))).toEqual(
      [1, 1],
    );

    await server.restart();
    expect(await backOnRedis(workers)).toEqual([true, true]);
    stop = true;
    const during = await traffic;
    expect(during.length).toBeGreaterThan(0);
    expect(during.filter((s) => s >= 500)).toEqual([]);

    // The restarted Redis kept nothing: a budget of 5 for `outage`, shared by both.
    const replies: Reply[] = [];
    for (let i = 0; i < 10; i++) replies.push(await workers[i % 2]!.get('outage'));
    const statuses = replies.map((r) => r.status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);
    expect(replies.map((r) => r.headers.get('x-ratelimit-limit'))).toEqual(new Array(10).fill('5'));
    // What decided is the identity's count in Redis: 5 spent, one window for both processes.
    // A fixed window's count is the key's value, its end the key's expiry.
    const [key] = (await redisCall(server.port, 'KEYS', `${prefix}:*outage*`)) as string[];
    const count = Number(await redisCall(server.port, 'GET', key!));
    expect(count).toBe(5);
    const leftMs = Number(await redisCall(server.port, 'PTTL', key!));
    expect(leftMs).toBeGreaterThan(0);
    const waits = replies.slice(5).map((r) => Number(r.headers.get('retry-after')));
    for (const wait of waits) expect(wait).toBeGreaterThanOrEqual(Math.ceil(leftMs / 1000));
    console.log(
      `insurance across processes: admitted with Redis stopped ${admitted.join(', ')} of 20 each; ` +
        `background requests during the outage ${during.length}, statuses ${[...new Set(during)].join(',')}; ` +
        `after restart ${statuses.filter((s) => s === 200).length} of 10 across both, Redis count ${count}`,
    );
  }, 90_000);
});

describe('instances learned from the store', () => {
  const { state, prefix } = twoWorkers({ announceIntervalMs: 100 });

  it('two processes each learn 2 and hold 3 of 5 while Redis is stopped; once one stops announcing, the other learns 1 and holds 5', async () => {
    const { server, workers } = state;
    const learned = (w: Worker, n: number) =>
      pollUntil(async () => (await w.gauge('rate_limit_instances')) === n, 10_000);
    expect(await Promise.all(workers.map((w) => learned(w, 2)))).toEqual([true, true]);
    expect(await redisCall(server.port, 'ZCARD', `${prefix}:instances`)).toBe(2);
    // The set expires with its newest member (3 intervals), like every key the limiter writes.
    const ttl = Number(await redisCall(server.port, 'PTTL', `${prefix}:instances`));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(300);

    await server.kill();
    const both = [];
    for (const w of workers) both.push(await twentyWhileDown(w, 'learned-2', 3));
    // The count survives the outage it is used in.
    expect(await Promise.all(workers.map((w) => w.gauge('rate_limit_instances')))).toEqual([2, 2]);

    await server.restart();
    expect(await backOnRedis(workers)).toEqual([true, true]);
    // Both announced again (the restarted Redis lost the set), so the 1 below is the crash's.
    expect(await Promise.all(workers.map((w) => learned(w, 2)))).toEqual([true, true]);
    await workers[1]!.stop(true);
    expect(await learned(workers[0]!, 1)).toBe(true);
    await server.kill();
    const alone = await twentyWhileDown(workers[0]!, 'learned-1', 5);
    console.log(
      `learned instances: admitted with Redis stopped ${both.join(', ')} of 20 (2 learned); ` +
        `${alone} of 20 once the peer was gone (1 learned)`,
    );
    await server.restart();
  }, 90_000);
});

describe('instances neither given nor learned', () => {
  it('a process that never reached the store admits 1 per period while it fails', async () => {
    const server = await startRedisServer();
    await server.kill();
    const registry = new Registry();
    const h = await createApp(
      'express',
      { ...OPTIONS, redis: server.url, connectTimeoutMs: 100, metrics: { registry } },
      [InsuredController],
      { userFromHeader: true },
    );
    try {
      const replies = await times(5, () => h.get('/insured', { 'x-user': 'never' }));
      expect(replies.map((r) => r.status)).toEqual([200, 429, 429, 429, 429]);
      expect(replies.map((r) => r.headers.get('x-ratelimit-limit'))).toEqual(
        new Array(5).fill('1'),
      );
      const gauge = (await registry.getSingleMetric('rate_limit_instances')!.get()).values[0]!;
      expect(gauge.value).toBe(0);
    } finally {
      await h.close();
    }
  });

  it('the memory store counts 1', async () => {
    const registry = new Registry();
    const h = await createApp('express', { store: 'memory', metrics: { registry } }, [
      InsuredController,
    ]);
    try {
      const gauge = (await registry.getSingleMetric('rate_limit_instances')!.get()).values[0]!;
      expect(gauge.value).toBe(1);
    } finally {
      await h.close();
    }
  });

  it.each([
    [
      { announceIntervalMs: 5 },
      /invalid announceIntervalMs 5: expected an integer number of ms from 10/,
    ],
    [{ announceIntervalMs: 1.5 }, /invalid announceIntervalMs 1\.5/],
    [{ instances: 0 }, /invalid instances 0: expected an integer >= 1/],
  ])('bad options fail at bootstrap, naming the value: %j', async (bad, message) => {
    const app = bootstrap('express', rootModule({ store: 'memory', ...bad }, [InsuredController]));
    await expect(app.then((a) => a.init())).rejects.toThrow(message);
  });
});
