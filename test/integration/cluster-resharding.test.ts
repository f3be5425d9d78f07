/**
 * Redis Cluster resharding under traffic (issue 5, item 4): while the slot of an identity
 * moves from one master to another (CLUSTER SETSLOT IMPORTING / MIGRATING, MIGRATE of its
 * keys, then SETSLOT NODE on every master), consumes keep being answered, no error reaches the
 * caller, and the final state is exact: every algorithm and stacked policies admit exactly
 * their limit out of 80 consumes spread over the migration.
 *
 * The client is a Cluster configured as the README asks (`retryDelayOnFailover: 0`,
 * `redisOptions.autoResendUnfulfilledCommands: false`). ioredis still follows MOVED and ASK
 * with that setting: `retryDelayOnFailover` only gates the retry of a command whose connection
 * closed, while MOVED (retryDelayOnMoved, default 0) and ASK are handled separately; the test
 * checks the servers saw both redirections.
 *
 * A private Cluster (startCluster), so resharding never disturbs other suites.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Cluster, Redis } from 'ioredis';
import { RateLimiter, RedisStore, type Decision, type PolicyInput } from '../../lib/index.js';
import { identityTag } from '../../lib/core/model/store-keys.js';
import { disconnect, startCluster, type ClusterHandle } from '../harness/redis.js';

interface Case {
  name: string;
  policies: PolicyInput[];
  /** Admitted out of 80 consumes. */
  admitted: number;
  /** Remaining per policy afterwards (peek). */
  remaining: number[];
}

// Daily periods: refill and window changes during the few seconds of the test cannot
// admit one more request, so the counts are exact.
const CASES: Case[] = [
  ...(['fixed-window', 'sliding-window', 'token-bucket', 'gcra'] as const).map((algorithm) => ({
    name: algorithm,
    policies: [{ name: 'q', rate: '50/d', algorithm }],
    admitted: 50,
    remaining: [0],
  })),
  {
    name: 'stacked token-bucket 30/d + fixed-window 50/d',
    policies: [
      { name: 'burst', rate: '30/d', algorithm: 'token-bucket' },
      { name: 'daily', rate: '50/d', algorithm: 'fixed-window' },
    ],
    admitted: 30,
    remaining: [0, 20],
  },
  {
    name: 'stacked gcra 40/d + sliding-window 60/d',
    policies: [
      { name: 'short', rate: '40/d', algorithm: 'gcra' },
      { name: 'long', rate: '60/d', algorithm: 'sliding-window' },
    ],
    admitted: 40,
    remaining: [0, 20],
  },
];

const PHASE_CONSUMES = 16; // 5 phases x 16 = 80 consumes per identity

interface NodeInfo {
  id: string;
  port: number;
}

/** Master of each slot, from CLUSTER NODES. */
function parseNodes(text: string): { nodes: NodeInfo[]; owner: (slot: number) => NodeInfo } {
  const nodes: NodeInfo[] = [];
  const ranges: { from: number; to: number; node: NodeInfo }[] = [];
  for (const line of text.trim().split('\n')) {
    const [id, address, flags, , , , , , ...slots] = line.split(' ');
    if (!flags!.includes('master')) continue;
    const node = { id: id!, port: Number(/:(\d+)@/.exec(address!)![1]) };
    nodes.push(node);
    for (const range of slots) {
      if (range.startsWith('[')) continue; // an open migration
      const [from, to = from] = range.split('-').map(Number);
      ranges.push({ from: from!, to: to!, node });
    }
  }
  const owner = (slot: number) => {
    const hit = ranges.find((r) => slot >= r.from && slot <= r.to);
    if (!hit) throw new Error(`slot ${slot} has no owner in\n${text}`);
    return hit.node;
  };
  return { nodes, owner };
}

/** `{ MOVED: n, ASK: n, ... }` from INFO errorstats. */
async function errorStats(admin: Redis): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const match of (await admin.info('errorstats')).matchAll(/errorstat_(\w+):count=(\d+)/g)) {
    out[match[1]!] = Number(match[2]);
  }
  return out;
}

describe('Cluster resharding under traffic', () => {
  let handle: ClusterHandle;
  let cluster: Cluster;
  const admins = new Map<number, Redis>();
  const admin = (port: number) => admins.get(port)!;

  beforeAll(async () => {
    handle = await startCluster();
    for (const { port } of handle.nodes) {
      admins.set(port, new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 }));
    }
    cluster = new Cluster(handle.nodes, {
      retryDelayOnFailover: 0,
      redisOptions: { autoResendUnfulfilledCommands: false },
    });
  });
  afterAll(async () => {
    if (cluster) await cluster.quit().catch(() => cluster.disconnect());
    for (const client of admins.values()) disconnect(client);
    await handle?.stop();
  });

  it('every algorithm and stacked policies stay exact while their slots move to another master', async () => {
    const prefix = `rs${randomUUID().slice(0, 8)}`;
    const limiter = new RateLimiter({
      store: new RedisStore({ client: cluster }),
      prefix,
      // The subject is correctness, not latency: a redirected call may take a few round trips.
      timeoutMs: 10_000,
      circuitBreaker: false,
    });
    const seed = admin(handle.nodes[0]!.port);
    await Promise.all([...admins.values()].map((a) => a.config('RESETSTAT')));

    // Every identity's slot (its hash tag) is taken from one source master and given to one
    // target master. Moving slots both ways at once can split the Cluster's mind: a node that
    // bumps its config epoch to take one slot then still claims a slot it is giving away, and
    // the two masters point at each other for ever (seen with Redis 7.0: MOVED ping-pong).
    const { nodes, owner } = parseNodes(String(await seed.cluster('NODES')));
    expect(nodes).toHaveLength(3);
    const [source, target, third] = nodes as [NodeInfo, NodeInfo, NodeInfo];
    const slots = new Set<number>();
    const ids: string[] = [];
    for (const c of CASES) {
      const base = `user:${c.name.replace(/\W+/g, '-')}-${randomUUID().slice(0, 6)}`;
      for (let k = 0; ; k++) {
        if (k === 100) throw new Error(`no identity like ${base} on the source master`);
        const slot = Number(await seed.cluster('KEYSLOT', `{${identityTag(`${base}-${k}`)}}`));
        if (owner(slot) !== source) continue;
        ids.push(`${base}-${k}`);
        slots.add(slot);
        break;
      }
    }
    /** Runs `step` on every slot, one slot after the other (as redis-cli --cluster reshard does). */
    const each = async (step: (slot: number) => Promise<unknown>) => {
      for (const slot of slots) await step(slot);
    };

    const decisions: Decision[][] = CASES.map(() => []);
    const errors: string[] = [];
    let phase = ''; // which step the traffic ran in, for error messages
    /** `n` concurrent consumes on every identity. */
    const traffic = (n: number) =>
      Promise.all(
        CASES.flatMap((c, i) =>
          Array.from({ length: n }, () =>
            limiter.consume(ids[i]!, c.policies).then(
              (d) => decisions[i]!.push(d),
              (error: unknown) => errors.push(`phase ${phase}: ${String(error).slice(0, 90)}`),
            ),
          ),
        ),
      );

    const steps: (() => Promise<unknown>)[] = [
      // 1. Open the migration: target importing, source migrating (keys still on the source).
      () =>
        each(async (slot) => {
          await admin(target.port).cluster('SETSLOT', slot, 'IMPORTING', source.id);
          await admin(source.port).cluster('SETSLOT', slot, 'MIGRATING', target.id);
        }),
      // 2. Move the keys: the source now answers ASK for them.
      () =>
        each(async (slot) => {
          const keys = (await admin(source.port).cluster('GETKEYSINSLOT', slot, 1000)) as string[];
          if (keys.length === 0) return;
          await admin(source.port).call(
            'MIGRATE',
            '127.0.0.1',
            String(target.port),
            '',
            '0',
            '5000',
            'KEYS',
            ...keys,
          );
        }),
      // 3. Hand the slot over on target and source: the source now answers MOVED.
      () =>
        each(async (slot) => {
          await admin(target.port).cluster('SETSLOT', slot, 'NODE', target.id);
          await admin(source.port).cluster('SETSLOT', slot, 'NODE', target.id);
        }),
      // 4. Tell the third master.
      () =>
        each(async (slot) => {
          await admin(third.port).cluster('SETSLOT', slot, 'NODE', target.id);
        }),
      // 5. Nothing more: traffic on the settled Cluster.
      async () => undefined,
    ];

    // Each phase: half its consumes in the state the previous step left, the other half
    // concurrently with the next step.
    for (const [n, step] of steps.entries()) {
      phase = `${n}a`;
      await traffic(PHASE_CONSUMES / 2);
      phase = `${n}b`;
      await Promise.all([traffic(PHASE_CONSUMES / 2), step()]);
    }

    expect(errors).toEqual([]);
    for (const [i, c] of CASES.entries()) {
      const got = decisions[i]!;
      expect({ case: c.name, consumes: got.length }).toEqual({ case: c.name, consumes: 80 });
      const admitted = got.filter((d) => d.allowed).length;
      expect({ case: c.name, admitted }).toEqual({ case: c.name, admitted: c.admitted });
      // Denials are plain limit denials (no cost_exceeds_limit, nothing else).
      expect(new Set(got.filter((d) => !d.allowed).map((d) => d.reason))).toEqual(
        new Set(['limit_exceeded']),
      );
      const peek = await limiter.peek(ids[i]!, c.policies);
      expect({ case: c.name, remaining: peek.policies.map((p) => p.remaining) }).toEqual({
        case: c.name,
        remaining: c.remaining,
      });
    }

    // The keys live on the target now, none are left on the source, and the Cluster is whole.
    for (const slot of slots) {
      expect(Number(await admin(source.port).cluster('COUNTKEYSINSLOT', slot))).toBe(0);
      expect(Number(await admin(target.port).cluster('COUNTKEYSINSLOT', slot))).toBeGreaterThan(0);
    }
    for (const a of admins.values()) {
      expect(String(await a.cluster('INFO'))).toContain('cluster_state:ok');
    }

    // ioredis followed both redirections (retryDelayOnFailover: 0 does not turn them off).
    const stats = await Promise.all([...admins.values()].map(errorStats));
    const total = (name: string) => stats.reduce((sum, s) => sum + (s[name] ?? 0), 0);
    expect(total('ASK')).toBeGreaterThan(0);
    expect(total('MOVED')).toBeGreaterThan(0);
  });
});
