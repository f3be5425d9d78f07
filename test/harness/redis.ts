/**
 * Redis for tests: clients to the Redis that global setup provides, and private redis-server
 * processes for fault-injection tests. Suites share the standalone Redis and the Cluster, so each
 * suite uses its own key prefix and nothing here ever flushes.
 */
import { rmSync } from 'node:fs';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import {
  startCluster as createCluster,
  NO_REDIS_MESSAGE,
  RedisProcess,
  freePort,
  makeTempDir,
  onPath,
} from './global-setup.js';

/** Closes an ioredis client without the 2 s timer it leaves behind after a failed connection. */
export { disconnect } from './global-setup.js';

/** URL of the shared standalone test Redis. Throws how to get one if there is none. */
export function redisUrl(): string {
  const url = process.env.NRL_TEST_REDIS_URL;
  if (!url) throw new Error(NO_REDIS_MESSAGE);
  return url;
}

/** Seed nodes of the shared test Cluster. Throws why there is none, if so. */
export function clusterNodes(): { host: string; port: number }[] {
  const nodes = process.env.NRL_TEST_CLUSTER_NODES;
  if (!nodes) {
    const reason = process.env.NRL_TEST_CLUSTER_ERROR ?? 'test/harness/global-setup.ts did not run';
    throw new Error(`No Redis Cluster for the tests: ${reason}`);
  }
  return nodes.split(',').map((entry) => {
    const node = entry.trim();
    const colon = node.lastIndexOf(':');
    const port = Number(node.slice(colon + 1));
    if (colon < 1 || !Number.isInteger(port)) throw new Error(`bad cluster node "${node}"`);
    return { host: node.slice(0, colon), port };
  });
}

/**
 * An ioredis client to the shared standalone Redis. Defaults: connects at once, fails a command
 * after one retry, queues commands while (re)connecting. Callers must `quit()` it.
 */
export function newRedis(options: RedisOptions = {}): Redis {
  return new Redis(redisUrl(), {
    lazyConnect: false,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    ...options,
  });
}

/** An ioredis Cluster client to the shared test Cluster. Callers must `quit()` it. */
export function newCluster(options: ClusterOptions = {}): Cluster {
  return new Cluster(clusterNodes(), options);
}

/** True when this machine can run private servers, i.e. `redis-server` is on PATH. */
export function redisServerAvailable(): boolean {
  return onPath('redis-server');
}

/** A private redis-server that a test may stop, kill and restart at will. */
export interface RedisServerHandle {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** SIGTERM (graceful shutdown), resolves once the process has exited. */
  stop(): Promise<void>;
  /** SIGKILL (crash), resolves once the process has exited. */
  kill(): Promise<void>;
  /** Starts it again on the same port (stopping it first if running); resolves once it answers. */
  restart(): Promise<void>;
}

const privateServers: { server: RedisProcess; dir: string }[] = [];

// Test code sees Jest's copy of `process`, whose 'exit' event never fires, so the exit hook in
// global-setup.ts cannot clean up after a test file. This runs after each file that imports us.
// Taken from globalThis rather than @jest/globals so that scripts outside Jest can import us too.
const afterAll = (globalThis as { afterAll?: (hook: () => Promise<void>) => void }).afterAll;
afterAll?.(async () => {
  const servers = privateServers.splice(0);
  await Promise.all(servers.map(({ server }) => server.stop('SIGKILL')));
  for (const { dir } of servers) rmSync(dir, { recursive: true, force: true });
});

async function startOnFreePort(dir: string, extraArgs: string[]): Promise<RedisProcess> {
  for (let attempt = 1; ; attempt++) {
    const server = new RedisProcess(await freePort(), dir, extraArgs);
    privateServers.push({ server, dir });
    try {
      await server.start();
      return server;
    } catch (error) {
      // Parallel workers can race for the same free port; anything else is a real failure.
      if (attempt === 3 || !server.tail().includes('Address already in use')) throw error;
    }
  }
}

/**
 * Starts a private, disposable redis-server on a free loopback port, with `extraArgs` appended to
 * its command line (e.g. `['--maxmemory', '1mb']`). It is killed after the test file at the latest.
 */
export async function startRedisServer(extraArgs: string[] = []): Promise<RedisServerHandle> {
  if (!redisServerAvailable()) {
    throw new Error(
      'startRedisServer needs redis-server on PATH: `apt-get install redis-server` ' +
        '(Debian/Ubuntu) or `brew install redis`.',
    );
  }
  const server = await startOnFreePort(makeTempDir(), extraArgs);
  return {
    port: server.port,
    url: `redis://127.0.0.1:${server.port}`,
    stop: () => server.stop('SIGTERM'),
    kill: () => server.stop('SIGKILL'),
    restart: async () => {
      await server.stop('SIGTERM');
      await server.start();
    },
  };
}

/** A private Redis Cluster that a test may reshard at will. */
export interface ClusterHandle {
  /** The masters, as ioredis Cluster seed nodes. */
  readonly nodes: { host: string; port: number }[];
  /** Kills every node (also done after the test file at the latest). */
  stop(): Promise<void>;
}

/**
 * Starts a private, disposable 3-master Cluster (no replicas) on free loopback ports, and
 * resolves once every node reports all 16384 slots assigned. Modelled on the shared Cluster of
 * global-setup.ts; its nodes are killed after the test file at the latest.
 */
export async function startCluster(): Promise<ClusterHandle> {
  if (!redisServerAvailable() || !onPath('redis-cli')) {
    throw new Error(
      'startCluster needs redis-server and redis-cli on PATH: `apt-get install redis-server ' +
        'redis-tools` (Debian/Ubuntu) or `brew install redis`.',
    );
  }
  const dir = makeTempDir();
  const servers: RedisProcess[] = [];
  const stop = async () => {
    await Promise.all(servers.map((server) => server.stop('SIGKILL')));
  };
  try {
    const ports = await createCluster(dir, servers);
    for (const server of servers) privateServers.push({ server, dir });
    return { nodes: ports.map((port) => ({ host: '127.0.0.1', port })), stop };
  } catch (error) {
    await stop();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * A private redis-server for one suite: started before its tests, stopped after. `client`
 * is tuned as a limiter's (never re-sends a command).
 */
export function privateRedis(): { readonly server: RedisServerHandle; readonly client: Redis } {
  const handle = {} as { server: RedisServerHandle; client: Redis };
  // Jest's globals, as above: this module also loads outside Jest (worker processes).
  const { beforeAll } = globalThis as unknown as { beforeAll: (hook: () => Promise<void>) => void };
  beforeAll(async () => {
    handle.server = await startRedisServer();
    handle.client = new Redis(handle.server.url, { autoResendUnfulfilledCommands: false });
  });
  afterAll!(async () => {
    handle.client.disconnect();
    await handle.server.stop();
  });
  return handle;
}

/** Calls of each command since the last `CONFIG RESETSTAT` (`INFO commandstats`), by name. */
export async function commandCalls(client: Redis): Promise<Record<string, number>> {
  const info = await client.info('commandstats');
  const counts: Record<string, number> = {};
  // Names may hold `|` (subcommands, e.g. `cluster|keyslot`).
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[m[1]!] = Number(m[2]);
  return counts;
}
