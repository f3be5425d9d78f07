/**
 * A private Cluster for failover tests: the 3 masters of startCluster, plus one replica of the
 * master that owns a given slot, so that master can fail over. Killed after the test file at
 * the latest (startCluster's nodes by redis.ts, the replica here).
 */
import { rmSync } from 'node:fs';
import { freePort, makeTempDir, RedisProcess, redisCall, waitUntil } from './global-setup.js';
import { startCluster, type ClusterHandle } from './redis.js';

/** A 3-master Cluster whose master of one slot has a replica. */
export interface ReplicatedClusterHandle extends ClusterHandle {
  /** Port of the master that owned the slot at start. */
  readonly masterPort: number;
  /** Port of its replica. */
  readonly replicaPort: number;
  /** SIGKILLs the node on `port` (a crash). */
  kill(port: number): Promise<void>;
  /** `master`, `slave` or `down`: what the node on `port` says it is. */
  role(port: number): Promise<string>;
  /**
   * Resolves once the node on `port` is a master and every live node says `cluster_state:ok`;
   * rejects after `timeoutMs`.
   */
  waitForMaster(port: number, timeoutMs: number): Promise<void>;
}

const owned: { replica: RedisProcess; dir: string }[] = [];
const afterAll = (globalThis as { afterAll?: (hook: () => Promise<void>) => void }).afterAll;
afterAll?.(async () => {
  for (const { replica, dir } of owned.splice(0)) {
    await replica.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

async function role(port: number): Promise<string> {
  const info = String(await redisCall(port, 'INFO', 'replication').catch(() => ''));
  return /role:(\w+)/.exec(info)?.[1] ?? 'down';
}

/** Starts the Cluster and a replica of the master of `slot`; resolves once it is in sync. */
export async function startReplicatedCluster(slot: number): Promise<ReplicatedClusterHandle> {
  const cluster = await startCluster();
  const ports = cluster.nodes.map((n) => n.port);
  const slots = (await redisCall(ports[0]!, 'CLUSTER', 'SLOTS')) as [number, number, unknown[]][];
  const range = slots.find(([from, to]) => slot >= from && slot <= to);
  if (!range) throw new Error(`slot ${slot} has no master`);
  const masterPort = Number(range[2][1]);
  const masterId = String(await redisCall(masterPort, 'CLUSTER', 'MYID'));

  const dir = makeTempDir();
  const replicaPort = await freePort(true);
  const replica = new RedisProcess(replicaPort, dir, [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    `${dir}/nodes-${replicaPort}.conf`,
    '--cluster-node-timeout',
    '2000',
  ]);
  owned.push({ replica, dir });
  await replica.start();
  await redisCall(replicaPort, 'CLUSTER', 'MEET', '127.0.0.1', String(masterPort));
  // REPLICATE needs the master in the replica's node table: MEET's handshake first.
  await waitUntil(
    async () => String(await redisCall(replicaPort, 'CLUSTER', 'NODES')).includes(masterId),
    10_000,
    () => `node :${replicaPort} never learned of master ${masterId}`,
  );
  await redisCall(replicaPort, 'CLUSTER', 'REPLICATE', masterId);
  let last = '';
  await waitUntil(
    async () => {
      const link = String(await redisCall(replicaPort, 'INFO', 'replication'));
      const infos = await Promise.all(
        [...ports, replicaPort].map((p) => redisCall(p, 'CLUSTER', 'INFO')),
      );
      last = `${link}\n${infos.join('\n')}`;
      return (
        link.includes('master_link_status:up') &&
        infos.every((i) => String(i).includes('cluster_known_nodes:4'))
      );
    },
    20_000,
    () => `the replica did not join. Last seen:\n${last}`,
    100,
  );

  const stop = async () => {
    await replica.stop('SIGKILL');
    await cluster.stop();
  };
  const all = [...ports, replicaPort];
  return {
    nodes: cluster.nodes,
    masterPort,
    replicaPort,
    stop,
    role,
    kill: async (port) => {
      if (port === replicaPort) return replica.stop('SIGKILL');
      // startCluster's processes are not exposed; SHUTDOWN NOSAVE is as abrupt for clients.
      await redisCall(port, 'SHUTDOWN', 'NOSAVE').catch(() => undefined);
    },
    waitForMaster: async (port, timeoutMs) => {
      let seen = '';
      await waitUntil(
        async () => {
          if ((await role(port)) !== 'master') return false;
          const infos = await Promise.all(
            all.map((p) => redisCall(p, 'CLUSTER', 'INFO').catch(() => 'down')),
          );
          seen = infos.map(String).join('\n');
          return infos.every((i) => i === 'down' || String(i).includes('cluster_state:ok'));
        },
        timeoutMs,
        () => `:${port} did not become a master of a healthy Cluster. Last seen:\n${seen}`,
      );
    },
  };
}
