/**
 * The index of controlled identities (issue 14): a request reads its identity's control hash
 * only when the index lists the identity, and overrides and exemptions set through any
 * instance reach every other one within `controlRefreshMs` (here driven by
 * `refreshControls()`, or by the timer with a short interval and a deadline), on the instance
 * that set them at once. On Redis standalone and Cluster; once across two OS processes.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Controller, Get, Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import {
  RateLimiter,
  RateLimitService,
  RedisStore,
  type RedisStoreOptions,
} from '../../lib/index.js';
import { controlKey } from '../../lib/core/model/store-keys.js';
import { INDEX_SCRIPT } from '../../lib/core/stores/redis/control-index.js';
import { TestClock } from '../conformance/suite.js';
import { CapturingLogger, createApp, pollUntil } from '../e2e/support/app.js';
import { newCluster, newRedis } from '../harness/redis.js';

beforeAll(() => Logger.overrideLogger(new CapturingLogger()));

/** Never by itself within a test: refreshes come from `refreshControls()`. */
const BY_HAND = 2 ** 31 - 1;
const FIVE = { rate: '5/m', algorithm: 'gcra' } as const;

describe.each([
  ['Redis standalone', () => newRedis({ autoResendUnfulfilledCommands: false })],
  [
    'Redis Cluster',
    () =>
      newCluster({
        retryDelayOnFailover: 0,
        redisOptions: { autoResendUnfulfilledCommands: false },
      }),
  ],
] as const)('the index of controlled identities on %s', (_name, connect) => {
  let client: Redis | Cluster;
  const stores: RedisStore[] = [];
  beforeAll(() => {
    client = connect();
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await client.quit();
  });

  /** One instance: its own store (and index) on the shared Redis. */
  function instance(prefix: string, options: Partial<RedisStoreOptions> = {}, denyCache = false) {
    const store = new RedisStore({ client, controlRefreshMs: BY_HAND, ...options });
    stores.push(store);
    const limiter = new RateLimiter({
      store,
      prefix,
      timeoutMs: 5000,
      ...(denyCache && { denyCache: { minRetryAfterMs: 0, maxAgeMs: 600_000 } }),
    });
    return { store, limiter, service: new RateLimitService(limiter) };
  }
  const newPrefix = () => `ix${randomUUID().slice(0, 8)}`;

  it('an exemption and an override set through A apply to B after B reads the index; their removal too; A sees its own at once', async () => {
    const prefix = newPrefix();
    const a = instance(prefix);
    const b = instance(prefix);
    await b.store.refreshControls();
    for (let i = 0; i < 5; i++) expect((await b.limiter.consume('key:1', FIVE)).allowed).toBe(true);
    expect((await b.limiter.consume('key:1', FIVE)).allowed).toBe(false);

    await a.service.exempt('key:1', { ttlMs: 60_000, reason: 'incident' });
    // A, which made the change, applies it to its very next decision.
    expect((await a.limiter.consume('key:1', FIVE)).policies[0]).toMatchObject({
      allowed: true,
      exempt: true,
    });
    // B does not read the hash of an identity its copy of the index does not list: the
    // staleness the default accepts, at most controlRefreshMs.
    expect((await b.limiter.consume('key:1', FIVE)).allowed).toBe(false);
    await b.store.refreshControls();
    expect((await b.limiter.consume('key:1', FIVE)).policies[0]).toMatchObject({
      allowed: true,
      exempt: true,
    });

    expect(await a.service.removeExemption('key:1')).toBe(true);
    expect((await a.limiter.consume('key:1', FIVE)).allowed).toBe(false);
    await b.store.refreshControls();
    expect((await b.limiter.consume('key:1', FIVE)).allowed).toBe(false);

    await a.service.setOverride('key:1', '*', '50/m', { ttlMs: 60_000, reason: 'big export' });
    await b.store.refreshControls();
    expect((await b.limiter.consume('key:1', FIVE)).policies[0]).toMatchObject({
      allowed: true,
      limit: 50,
      remaining: 49,
      override: { periodMs: 60_000 },
    });
    expect(await a.service.removeOverride('key:1', '*')).toBe(true);
    // The member stays until its end (an empty hash is read meanwhile): taking it out could
    // hide another instance's new entry (see the next test).
    expect(await client.zrange(`${prefix}:{ctl index}`, '0', '-1')).toEqual([
      controlKey(prefix, 'key:1'),
    ]);
    await b.store.refreshControls();
    expect((await b.limiter.consume('key:1', FIVE)).policies[0]).toMatchObject({
      allowed: false,
      limit: 5,
    });
  });

  it('a removal on A interleaved with a new exemption on B never hides the exemption from C', async () => {
    const prefix = newPrefix();
    const [a, b, c] = [instance(prefix), instance(prefix), instance(prefix)];
    await c.store.refreshControls();
    await a.service.setOverride('key:8', '*', '50/m', { ttlMs: 60_000, reason: 'old' });
    // A removes the last field: its hash change lands first...
    const key = controlKey(prefix, 'key:8');
    await client.hdel(key, 'o:*:*', 'r:o:*:*');
    // ...then B sets an exemption (index first, hash second)...
    await b.service.exempt('key:8', { ttlMs: 60_000, reason: 'new' });
    // ...then A's index change, as A's removal sends it (its hash was empty): the member
    // must survive it.
    const index = `${prefix}:{ctl index}`;
    await client.eval(INDEX_SCRIPT, 2, index, `${index}:v`, 'r', '', key, '1');
    expect(await client.zrange(`${prefix}:{ctl index}`, '0', '-1')).toEqual([key]);
    await c.store.refreshControls();
    for (let i = 0; i < 7; i++) {
      expect((await c.limiter.consume('key:8', FIVE)).policies[0]).toMatchObject({
        allowed: true,
        exempt: true,
      });
    }
  });

  it("a new exemption lifts a denial B's deny cache remembers, once B reads the index", async () => {
    const prefix = newPrefix();
    const a = instance(prefix);
    const b = instance(prefix, {}, true);
    await b.store.refreshControls();
    const once = { rate: '1/h', algorithm: 'gcra' } as const;
    expect((await b.limiter.consume('key:2', once)).allowed).toBe(true);
    expect((await b.limiter.consume('key:2', once)).allowed).toBe(false);
    await a.service.exempt('key:2', { ttlMs: 60_000, reason: 'support ticket' });
    // Remembered for up to 10 minutes (maxAgeMs), and the index read is what forgets it.
    expect((await b.limiter.consume('key:2', once)).allowed).toBe(false);
    await b.store.refreshControls();
    expect((await b.limiter.consume('key:2', once)).policies[0]).toMatchObject({
      allowed: true,
      exempt: true,
    });
  });

  it('a control set before an instance starts applies to its first decision, before and after its first index read', async () => {
    const prefix = newPrefix();
    await instance(prefix).service.exempt('key:3', { ttlMs: 60_000, reason: 'before boot' });
    const late = instance(prefix);
    // No read awaited: until the index has been read, every request reads its control hash.
    expect((await late.limiter.consume('key:3', FIVE)).policies[0]!.exempt).toBe(true);
    await late.store.refreshControls();
    expect((await late.limiter.consume('key:3', FIVE)).policies[0]!.exempt).toBe(true);
    expect((await late.limiter.consume('key:4', FIVE)).policies[0]!.exempt).toBeUndefined();
  });

  it('an entry past its end (plus the margin) leaves every copy of the index at its next read, and Redis at the next change', async () => {
    const prefix = newPrefix();
    const clock = new TestClock();
    const a = instance(prefix, { clock: clock.read });
    const b = instance(prefix, { clock: clock.read });
    await a.service.exempt('key:5', { ttlMs: 1000, reason: 'short' });
    await b.store.refreshControls();
    expect((await b.limiter.consume('key:5', FIVE)).policies[0]!.exempt).toBe(true);
    const index = `${prefix}:{ctl index}`;
    expect(await client.zrange(index, '0', '-1')).toEqual([controlKey(prefix, 'key:5')]);
    // A hash written by hand, not indexed: read only while the index still lists the identity.
    const handWritten = () =>
      client.hset(controlKey(prefix, 'key:5'), 'exempt', String(clock.now + 60_000));
    // Its end is 1000 ms away, kept 1000 ms longer in the index.
    clock.now += 1999;
    await handWritten();
    await b.store.refreshControls();
    expect((await b.limiter.consume('key:5', FIVE)).policies[0]!.exempt).toBe(true);
    clock.now += 1;
    await handWritten();
    await b.store.refreshControls();
    expect((await b.limiter.consume('key:5', FIVE)).policies[0]!.exempt).toBeUndefined();
    await a.service.exempt('key:6', { ttlMs: 1000, reason: 'another' });
    expect(await client.zrange(index, '0', '-1')).toEqual([controlKey(prefix, 'key:6')]);
  });

  it('the timer reads the index every controlRefreshMs', async () => {
    const prefix = newPrefix();
    const a = instance(prefix);
    const b = instance(prefix, { controlRefreshMs: 50 });
    await b.store.refreshControls();
    await a.service.exempt('key:8', { ttlMs: 60_000, reason: 'timer' });
    const exempt = async () => (await b.limiter.peek('key:8', FIVE)).policies[0]!.exempt === true;
    expect(await pollUntil(exempt, 5000)).toBe(true);
    await a.service.removeExemption('key:8');
    expect(await pollUntil(async () => !(await exempt()), 5000)).toBe(true);
  });

  it('controlRefreshMs 0 reads the control hash on every request, a hand-written one too; the index does not list a hand-written one', async () => {
    const prefix = newPrefix();
    const exact = instance(prefix, { controlRefreshMs: 0 });
    const indexed = instance(prefix);
    await indexed.store.refreshControls();
    await client.hset(controlKey(prefix, 'key:7'), 'exempt', String(Date.now() + 60_000));
    await client.pexpire(controlKey(prefix, 'key:7'), 60_000);
    expect((await exact.limiter.consume('key:7', FIVE)).policies[0]!.exempt).toBe(true);
    await indexed.store.refreshControls();
    expect((await indexed.limiter.consume('key:7', FIVE)).policies[0]!.exempt).toBeUndefined();
  });
});

it('RedisStore rejects a bad controlRefreshMs, naming it', () => {
  const client = newRedis({ lazyConnect: true });
  for (const bad of [-1, 1.5, 2 ** 31, '1000', true]) {
    expect(() => new RedisStore({ client, controlRefreshMs: bad as unknown as number })).toThrow(
      `invalid controlRefreshMs ${JSON.stringify(bad)}`,
    );
  }
  client.disconnect();
});

@Controller()
class HiController {
  @Get('hi') hi() {
    return 'hi';
  }
}

describe('across two OS processes', () => {
  let worker: ChildProcessWithoutNullStreams;
  const pending: ((line: string) => void)[] = [];
  let stderr = '';
  const WORKER = fileURLToPath(new URL('../harness/control-worker.ts', import.meta.url));
  const next = () => new Promise<string>((resolve) => pending.push(resolve));
  beforeAll(async () => {
    worker = spawn(process.execPath, ['--import', 'tsx', WORKER], { env: process.env });
    worker.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const ready = next();
    createInterface({ input: worker.stdout }).on('line', (line) => pending.shift()?.(line));
    worker.on('exit', (code) => {
      for (const resolve of pending.splice(0)) resolve(`exit ${code}: ${stderr}`);
    });
    expect(await ready).toBe('ready');
  }, 30_000);
  afterAll(async () => {
    if (!worker || worker.exitCode !== null) return;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.stdin.end();
    worker.kill();
    await exited;
  });

  it("an exemption another process sets applies to this process's app within controlRefreshMs", async () => {
    const app = await createApp('express', { default: '2/m', controlRefreshMs: 100 }, [
      HiController,
    ]);
    try {
      expect((await app.get('/hi')).status).toBe(200);
      expect((await app.get('/hi')).status).toBe(200);
      expect((await app.get('/hi')).status).toBe(429);
      const send = async (op: string) => {
        const done = next();
        worker.stdin.write(
          `${JSON.stringify({ prefix: app.prefix, identity: 'ip:127.0.0.1', op })}\n`,
        );
        expect(await done).toBe('done');
        return performance.now();
      };
      const exemptAt = await send('exempt');
      expect(await pollUntil(async () => (await app.get('/hi')).status === 200, 5000)).toBe(true);
      // 100 ms between reads, plus a round trip; generous for a loaded machine (a store that
      // did not read the index would not see it at all).
      expect(performance.now() - exemptAt).toBeLessThan(3000);
      const removedAt = await send('removeExemption');
      expect(await pollUntil(async () => (await app.get('/hi')).status === 429, 5000)).toBe(true);
      expect(performance.now() - removedAt).toBeLessThan(3000);
    } finally {
      await app.close();
    }
  });
});
