/**
 * A private Sentinel group for failover tests: a primary, a replica and three Sentinels
 * (`redis-server --sentinel`, which every redis-server binary can run), on free loopback ports,
 * in a directory of their own. Everything is killed after the test file at the latest.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  freePort,
  makeTempDir,
  onPath,
  RedisProcess,
  redisCall,
  waitUntil,
} from './global-setup.js';

/** The name the Sentinels monitor the primary under (ioredis' `name` option). */
const SENTINEL_GROUP = 'nrl';

/**
 * How fast the Sentinels act: a primary that has not answered for this long (ms) is
 * subjectively down. 1 s keeps a killed primary's failover within a few seconds.
 */
const DOWN_AFTER_MS = 1000;

/** A primary, its replica and three Sentinels watching them. */
export interface SentinelGroupHandle {
  /** The Sentinels, as ioredis `sentinels`. */
  readonly sentinels: { host: string; port: number }[];
  /** {@link SENTINEL_GROUP} */
  readonly name: string;
  /** The port of the data node the Sentinels currently name as primary. */
  primaryPort(): Promise<number>;
  /** The port of the data node that is not the primary. */
  replicaPort(): Promise<number>;
  /** `master`, `slave`, or `down`: what the data node on `port` says it is. */
  role(port: number): Promise<string>;
  /** SIGKILLs the data node on `port` (a crash). */
  kill(port: number): Promise<void>;
  /**
   * Starts the killed data node on `port` again (empty: no persistence) and resolves once the
   * Sentinels have made it a replica of the primary of the moment, in sync; rejects after
   * `timeoutMs`.
   */
  rejoin(port: number, timeoutMs: number): Promise<void>;
  /**
   * Resolves once every Sentinel names a primary other than `oldPort` and that node says
   * `role:master`; rejects after `timeoutMs`. Returns the new primary's port.
   */
  waitForNewPrimary(oldPort: number, timeoutMs: number): Promise<number>;
  /** Kills every process (also done after the test file at the latest). */
  stop(): Promise<void>;
}

const groups: { processes: RedisProcess[]; dirs: string[] }[] = [];

// Jest's globals, as in redis.ts: this module may also load outside Jest.
const afterAll = (globalThis as { afterAll?: (hook: () => Promise<void>) => void }).afterAll;
afterAll?.(async () => {
  for (const { processes, dirs } of groups.splice(0)) {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
});

async function askSentinel(port: number): Promise<number | undefined> {
  const reply = await redisCall(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_GROUP).catch(
    () => undefined,
  );
  return Array.isArray(reply) ? Number(reply[1]) : undefined;
}

async function role(port: number): Promise<string> {
  const info = String(await redisCall(port, 'INFO', 'replication').catch(() => ''));
  return /role:(\w+)/.exec(info)?.[1] ?? 'down';
}

/**
 * Starts the group and resolves once the replica is in sync and every Sentinel knows the
 * replica and the other two Sentinels (so a failover can be agreed at once).
 */
export async function startSentinelGroup(): Promise<SentinelGroupHandle> {
  if (!onPath('redis-server')) {
    throw new Error(
      'startSentinelGroup needs redis-server on PATH: `apt-get install redis-server` ' +
        '(Debian/Ubuntu) or `brew install redis`.',
    );
  }
  const dir = makeTempDir();
  const processes: RedisProcess[] = [];
  const dirs = [dir];
  groups.push({ processes, dirs });
  const [primary, replica] = [await freePort(), await freePort()];
  const data = new Map<number, RedisProcess>();
  // Each data node in its own subdirectory: both would otherwise write dump.rdb in one place
  // during the replica's full sync.
  for (const port of [primary, replica]) {
    const nodeDir = makeTempDir();
    dirs.push(nodeDir);
    const args = port === replica ? ['--replicaof', '127.0.0.1', String(primary)] : [];
    const node = new RedisProcess(port, nodeDir, args);
    data.set(port, node);
    processes.push(node);
  }
  await data.get(primary)!.start();
  await data.get(replica)!.start();

  const sentinelPorts = [await freePort(), await freePort(), await freePort()];
  for (const port of sentinelPorts) {
    const config = join(dir, `sentinel-${port}.conf`);
    writeFileSync(
      config,
      [
        `sentinel monitor ${SENTINEL_GROUP} 127.0.0.1 ${primary} 2`,
        `sentinel down-after-milliseconds ${SENTINEL_GROUP} ${DOWN_AFTER_MS}`,
        `sentinel failover-timeout ${SENTINEL_GROUP} 3000`,
        `sentinel parallel-syncs ${SENTINEL_GROUP} 1`,
        '',
      ].join('\n'),
    );
    const sentinel = new RedisProcess(port, dir, ['--sentinel'], config);
    processes.push(sentinel);
  }
  await Promise.all(processes.slice(2).map((p) => p.start()));

  let last = '';
  await waitUntil(
    async () => {
      const replication = String(await redisCall(replica, 'INFO', 'replication'));
      const views = await Promise.all(
        sentinelPorts.map(async (port) => {
          const reply = await redisCall(port, 'SENTINEL', 'MASTER', SENTINEL_GROUP);
          const fields = reply as string[];
          const field = (name: string) => fields[fields.indexOf(name) + 1];
          return { replicas: field('num-slaves'), sentinels: field('num-other-sentinels') };
        }),
      );
      last = `${replication}\n${JSON.stringify(views)}`;
      return (
        replication.includes('master_link_status:up') &&
        views.every((v) => v.replicas === '1' && v.sentinels === '2')
      );
    },
    20_000,
    () => `Sentinel group did not settle. Last seen:\n${last}`,
    100,
  );

  const primaryPort = async (): Promise<number> => {
    const port = await askSentinel(sentinelPorts[0]!);
    if (port === undefined) throw new Error('the Sentinel names no primary');
    return port;
  };
  return {
    sentinels: sentinelPorts.map((port) => ({ host: '127.0.0.1', port })),
    name: SENTINEL_GROUP,
    primaryPort,
    replicaPort: async () => {
      const current = await primaryPort();
      return current === primary ? replica : primary;
    },
    role,
    kill: async (port) => data.get(port)!.stop('SIGKILL'),
    rejoin: async (port, timeoutMs) => {
      await data.get(port)!.start();
      let info = '';
      await waitUntil(
        async () => {
          info = String(await redisCall(port, 'INFO', 'replication').catch(() => ''));
          return info.includes('role:slave') && info.includes('master_link_status:up');
        },
        timeoutMs,
        () => `:${port} did not rejoin as an in-sync replica within ${timeoutMs} ms:\n${info}`,
        100,
      );
    },
    waitForNewPrimary: async (oldPort, timeoutMs) => {
      let views: (number | undefined)[] = [];
      await waitUntil(
        async () => {
          views = await Promise.all(sentinelPorts.map(askSentinel));
          const next = views[0];
          return (
            next !== undefined &&
            next !== oldPort &&
            views.every((v) => v === next) &&
            (await role(next)) === 'master'
          );
        },
        timeoutMs,
        () => `no new primary within ${timeoutMs} ms (Sentinels say ${views.join(', ')})`,
      );
      return views[0]!;
    },
    stop: async () => {
      await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    },
  };
}
