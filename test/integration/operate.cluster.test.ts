/**
 * Operating on Redis Cluster (issue 7): inspect, reset and override writes touch only the
 * identity's slot, on the master that owns it. A private Cluster, so `INFO commandstats` of
 * each master counts only this test's commands.
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { Cluster, Redis } from 'ioredis';
import { RateLimiter, RateLimitService, RedisStore } from '../../lib/index.js';
import { controlKey } from '../../lib/core/model/store-keys.js';
import { commandCalls, disconnect, startCluster, type ClusterHandle } from '../harness/redis.js';

/** Commands that read or write keys (what a keyspace-wide operation would show). */
const DATA_COMMANDS = [
  'scan',
  'keys',
  'evalsha',
  'eval',
  'unlink',
  'del',
  'get',
  'hgetall',
  'hset',
  'cluster|getkeysinslot',
];

describe('operating on Redis Cluster', () => {
  let handle: ClusterHandle;
  let cluster: Cluster;
  let masters: Redis[];
  beforeAll(async () => {
    Logger.overrideLogger(false);
    handle = await startCluster();
    cluster = new Cluster(handle.nodes, {
      retryDelayOnFailover: 0,
      redisOptions: { autoResendUnfulfilledCommands: false },
    });
    masters = handle.nodes.map((n) => new Redis(n.port, n.host));
  }, 60_000);
  afterAll(async () => {
    await cluster?.quit();
    await Promise.all((masters ?? []).map((m) => disconnect(m)));
    await handle?.stop();
  });

  it("inspect, reset and override writes run only on the master owning the identity's slot", async () => {
    const prefix = `cl${randomUUID().slice(0, 8)}`;
    const limiter = new RateLimiter({
      store: new RedisStore({ client: cluster }),
      prefix,
      timeoutMs: 5000,
    });
    const service = new RateLimitService(limiter);
    const policies = [
      { name: 'burst', rate: '10/s' },
      { name: 'daily', rate: '100/d', algorithm: 'fixed-window' as const },
    ];
    // Other identities, spread over every master.
    for (let i = 0; i < 30; i++) await service.check(`other:${i}`, policies, { scope: 'jobs' });
    await service.check('user:42', policies, { scope: 'jobs', cost: 3 });
    const slot = (await cluster.cluster('KEYSLOT', controlKey(prefix, 'user:42'))) as number;
    const owners = await Promise.all(
      masters.map(async (m) => ((await m.cluster('COUNTKEYSINSLOT', slot)) as number) > 0),
    );
    expect(owners.filter(Boolean)).toHaveLength(1);
    // The identity's own keys only: other suites share the cluster, and their keys come and go.
    const ownKeys = () =>
      Promise.all(masters.map(async (m) => (await m.keys(`${prefix}:{user:42}:*`)).length));
    const keyCounts = await ownKeys();
    const before = await Promise.all(masters.map(commandCalls));

    const inspected = await service.inspect('user:42', undefined, policies);
    expect(inspected.map((e) => [e.policy, e.limit, e.remaining])).toEqual([
      ['burst', 10, 7],
      ['daily', 100, 97],
    ]);
    await service.setOverride('user:42', 'jobs', '50/s', {
      policy: 'burst',
      ttlMs: 60_000,
      reason: 'test',
    });
    expect((await service.listOverrides('user:42')).overrides).toHaveLength(1);
    expect(await service.reset('user:42')).toBe(2);
    expect((await service.inspect('user:42')).length).toBe(0);

    const after = await Promise.all(masters.map(commandCalls));
    masters.forEach((_, i) => {
      const delta = (name: string) => (after[i]![name] ?? 0) - (before[i]![name] ?? 0);
      const touched = DATA_COMMANDS.filter((c) => delta(c) > 0);
      if (owners[i]) {
        // Scripts (inspect, control) and the reset's GETKEYSINSLOT + UNLINK, on this master only.
        expect(delta('evalsha') + delta('eval')).toBeGreaterThanOrEqual(5);
        expect(delta('cluster|getkeysinslot')).toBe(3);
        expect(delta('unlink')).toBe(2);
      } else {
        expect(touched).toEqual([]);
      }
      expect(delta('scan') + delta('keys')).toBe(0);
    });
    // Only the owner lost keys: the identity's two policy keys (its control key stays).
    const keyCountsAfter = await ownKeys();
    expect(keyCountsAfter.map((n, i) => keyCounts[i]! - n)).toEqual(owners.map((o) => (o ? 1 : 0)));
  });
});
