/**
 * Jest global setup: gives every test suite a real Redis, standalone and a 3-master Cluster, and
 * publishes them to the workers as `NRL_TEST_REDIS_URL`, `NRL_TEST_CLUSTER_NODES` or
 * `NRL_TEST_CLUSTER_ERROR` (workers inherit `process.env`).
 *
 * Jest loads this file outside its own module resolver, where `./x.js` is not mapped to `./x.ts`,
 * so it cannot import local modules. That is why the process helpers live here and redis.ts
 * imports them from this file instead of the other way round.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

/** What to do when no Redis can be found; shown by global setup and by the test helpers. */
export const NO_REDIS_MESSAGE = [
  'No Redis available for the tests. Any one of these works:',
  '  - set REDIS_URL=redis://host:port (and REDIS_CLUSTER_NODES=host:port,... for a Cluster)',
  '  - install redis-server: `apt-get install redis-server` (Debian/Ubuntu) or `brew install redis`',
  '  - install Docker and run `npm i -D testcontainers`',
].join('\n');

/** Where global setup leaves its handles for global teardown (same process, same globalThis). */
export interface HarnessState {
  processes: RedisProcess[];
  dir?: string;
  container?: { stop(): Promise<unknown> };
}
const STATE_KEY = '__nrlRedisHarness'; // read by global-teardown.ts

/** True when `command` is an executable file on PATH. */
export function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

// Ports handed out by this process, so parallel callers never get the same one twice.
const reserved = new Set<number>();

function probePort(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        resolve(typeof address === 'object' && address ? address.port : undefined),
      );
    });
  });
}

/**
 * A loopback port that is free right now. With `clusterBus`, port + 10000 (the Cluster bus port)
 * is free as well.
 */
export async function freePort(clusterBus = false): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await probePort(0);
    if (port === undefined || reserved.has(port) || reserved.has(port + 10000)) continue;
    if (clusterBus && (port + 10000 > 65535 || (await probePort(port + 10000)) === undefined)) {
      continue;
    }
    reserved.add(port);
    if (clusterBus) reserved.add(port + 10000);
    return port;
  }
  throw new Error('could not find a free loopback port');
}

// Cleaned up when this process exits, e.g. after global setup failed half-way. (Test code never
// sees 'exit': Jest gives it a copy of `process`. redis.ts cleans up with afterAll instead.)
const live = new Set<RedisProcess>();
const tempDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const server of live) server.killNow();
    for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  });
}

/** A fresh temporary directory, removed when this process exits. */
export function makeTempDir(): string {
  installExitHook();
  const dir = mkdtempSync(join(tmpdir(), 'nrl-redis-'));
  tempDirs.add(dir);
  return dir;
}

let pdeathsig: boolean | undefined;

/**
 * On Linux, `setpriv --pdeathsig KILL` makes the kernel kill redis-server when its parent dies,
 * even by SIGKILL, which no exit handler can cover. It execs, so the pid is still redis-server's.
 */
function launcher(): string[] {
  if (pdeathsig === undefined) {
    try {
      pdeathsig =
        process.platform === 'linux' &&
        execFileSync('setpriv', ['--help'], { encoding: 'utf8' }).includes('--pdeathsig');
    } catch {
      pdeathsig = false;
    }
  }
  return pdeathsig ? ['setpriv', '--pdeathsig', 'KILL', '--', 'redis-server'] : ['redis-server'];
}

/**
 * Closes a client. Skips ioredis' disconnect() once the connection has already ended: that
 * would arm a 2 s "destroy the socket" timer that nothing clears, keeping the process alive.
 */
export function disconnect(client: Redis): void {
  if (client.status !== 'end') client.disconnect();
}

/** Sends one command to a local Redis on a throwaway connection that never retries. */
export async function redisCall(port: number, ...args: string[]): Promise<unknown> {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    connectTimeout: 1000,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
  });
  client.on('error', () => {}); // failures surface through the rejected promises below
  try {
    await client.connect();
    const [command = 'PING', ...rest] = args;
    return await client.call(command, ...rest);
  } finally {
    disconnect(client);
  }
}

/**
 * Polls `check` every `intervalMs` until it returns true; throws `describe()` on timeout.
 * An error thrown by `check` ends the wait at once.
 */
export async function waitUntil(
  check: () => Promise<boolean>,
  timeoutMs: number,
  describe: () => string,
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() >= deadline) throw new Error(describe());
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * One redis-server child process on a fixed port, restartable on that same port. With a
 * `configFile`, it is read first (Sentinel needs one it can rewrite: pass `--sentinel` in
 * `extraArgs`).
 */
export class RedisProcess {
  private child: ChildProcess | undefined;
  private exitInfo = '';
  private output = '';

  constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly extraArgs: string[] = [],
    private readonly configFile?: string,
  ) {}

  /** Starts redis-server and resolves once it answers (and has loaded any data). */
  async start(timeoutMs = 10_000): Promise<void> {
    if (this.child) throw new Error(`redis-server :${this.port} is already running`);
    installExitHook();
    const [command = 'redis-server', ...launchArgs] = launcher();
    const args = this.configFile === undefined ? [] : [this.configFile];
    args.push('--port', String(this.port), '--bind', '127.0.0.1');
    args.push('--save', '', '--appendonly', 'no', '--dir', this.dir, ...this.extraArgs);
    // Attached, not detached: a Ctrl-C to the terminal's process group reaches redis-server too.
    const child = spawn(command, [...launchArgs, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    this.exitInfo = '';
    live.add(this);
    // Teardown, afterAll or the exit hook stop the server; it alone must not keep a worker alive.
    child.unref();
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on('data', (chunk: Buffer) => (this.output = (this.output + chunk).slice(-4000)));
      (stream as unknown as { unref?: () => void } | null)?.unref?.();
    }
    const gone = (info: string): void => {
      this.exitInfo ||= info;
      if (this.child === child) this.child = undefined;
      live.delete(this);
    };
    child.on('error', (error) => gone(`failed to start: ${error.message}`));
    child.on('exit', (code, signal) => gone(`exited with ${signal ?? `code ${code}`}`));
    const failure = (reason: string): string =>
      `redis-server :${this.port} did not start (${reason}). Output:\n${this.tail()}`;
    await waitUntil(
      async () => {
        if (!this.child) throw new Error(failure(this.exitInfo));
        // Checking the pid makes sure we are not talking to some other server on a raced port.
        const info = String(await redisCall(this.port, 'INFO').catch(() => ''));
        // A Sentinel loads no data, so its INFO has no `loading` field.
        const loaded = info.includes('loading:0\r\n') || info.includes('redis_mode:sentinel');
        return info.includes(`process_id:${child.pid}\r\n`) && loaded;
      },
      timeoutMs,
      () => failure(`not ready within ${timeoutMs} ms`),
    );
  }

  /** Sends `signal` and waits for the exit; escalates to SIGKILL after `graceMs`. */
  async stop(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM', graceMs = 5000): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    child.kill('SIGCONT'); // a SIGSTOP-paused server only acts on the signal once resumed
    // A ref'd timer keeps the event loop alive until the exit is seen, despite child.unref().
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  /** Synchronous SIGKILL, for process 'exit' handlers where nothing async runs. */
  killNow(): void {
    this.child?.kill('SIGKILL');
  }

  /** The last few kB of the server's stdout and stderr, for error messages. */
  tail(): string {
    return this.output.trim() || '(no output)';
  }
}

const execFileAsync = promisify(execFile);

/**
 * Starts a 3-master Cluster (no replicas) on free loopback ports, pushing each node into
 * `processes` before it starts (so a failure still leaves them to clean up), and resolves
 * with the ports once every node reports all 16384 slots assigned.
 */
export async function startCluster(dir: string, processes: RedisProcess[]): Promise<number[]> {
  const ports = [await freePort(true), await freePort(true), await freePort(true)];
  const nodes = ports.map((port) => {
    const config = join(dir, `nodes-${port}.conf`);
    const args = ['--cluster-enabled', 'yes', '--cluster-config-file', config];
    return new RedisProcess(port, dir, [...args, '--cluster-node-timeout', '2000']);
  });
  processes.push(...nodes);
  await Promise.all(nodes.map((node) => node.start()));
  const seeds = ports.map((port) => `127.0.0.1:${port}`);
  const create = ['--cluster', 'create', ...seeds, '--cluster-replicas', '0', '--cluster-yes'];
  await execFileAsync('redis-cli', create, { timeout: 30_000 }).catch((error: Error) => {
    const { stdout = '', stderr = '' } = error as Error & { stdout?: string; stderr?: string };
    throw new Error(`redis-cli --cluster create failed: ${error.message}\n${stdout}${stderr}`);
  });
  let last = '';
  await waitUntil(
    async () => {
      const infos = await Promise.all(
        ports.map((p) => redisCall(p, 'CLUSTER', 'INFO').catch((e: Error) => e.message)),
      );
      last = infos.map(String).join('\n');
      return infos.every((info) =>
        ['cluster_state:ok', 'cluster_slots_assigned:16384', 'cluster_known_nodes:3'].every((l) =>
          String(info).includes(l),
        ),
      );
    },
    20_000,
    () => `Redis Cluster on ${seeds.join(', ')} did not become ready. Last CLUSTER INFO:\n${last}`,
    100,
  );
  return ports;
}

interface StartedContainer {
  getHost(): string;
  getMappedPort(port: number): number;
  stop(): Promise<unknown>;
}
interface ContainerBuilder {
  withExposedPorts(...ports: number[]): ContainerBuilder;
  start(): Promise<StartedContainer>;
}

/** Last resort: a standalone Redis in Docker, if testcontainers is installed. */
async function startContainer(): Promise<StartedContainer | string> {
  // A variable module name keeps TypeScript from requiring this optional package.
  const moduleName = 'testcontainers';
  let tc: { GenericContainer: new (image: string) => ContainerBuilder };
  try {
    tc = await import(moduleName);
  } catch {
    return 'testcontainers is not installed';
  }
  try {
    return await new tc.GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
  } catch (error) {
    return `Docker is not usable: ${(error as Error).message}`;
  }
}

async function serverVersion(url: string): Promise<string> {
  const client = new Redis(url, { lazyConnect: true, retryStrategy: () => null });
  let cause: Error | undefined; // connect() only says "Connection is closed"; this says why
  client.on('error', (error: Error) => (cause ??= error));
  try {
    await client.connect();
    return /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? '?';
  } catch (error) {
    const reason = (cause ?? (error as Error)).message;
    throw new Error(`REDIS_URL=${url} is not usable: ${reason}\n\n${NO_REDIS_MESSAGE}`);
  } finally {
    disconnect(client);
  }
}

export default async function globalSetup(): Promise<void> {
  const started = Date.now();
  const state: HarnessState = { processes: [] };
  (globalThis as Record<string, unknown>)[STATE_KEY] = state;
  for (const name of ['NRL_TEST_REDIS_URL', 'NRL_TEST_CLUSTER_NODES', 'NRL_TEST_CLUSTER_ERROR']) {
    delete process.env[name];
  }
  const canSpawn = onPath('redis-server');
  const local = canSpawn ? `redis-server ${/v=(\S+)/.exec(redisServerVersion())?.[1]}` : '';
  const dir = (): string => (state.dir ??= makeTempDir());

  let standalone: string;
  if (process.env.REDIS_URL) {
    const url = process.env.REDIS_URL;
    process.env.NRL_TEST_REDIS_URL = url;
    standalone = `REDIS_URL ${await serverVersion(url)} ${url.replace(/\/\/[^@/]*@/, '//***@')}`;
  } else if (canSpawn) {
    const server = new RedisProcess(await freePort(), dir());
    state.processes.push(server);
    await server.start();
    process.env.NRL_TEST_REDIS_URL = `redis://127.0.0.1:${server.port}`;
    standalone = `${local} standalone :${server.port}`;
  } else {
    const container = await startContainer();
    if (typeof container === 'string') throw new Error(`${NO_REDIS_MESSAGE}\n(${container})`);
    state.container = container;
    const url = `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
    process.env.NRL_TEST_REDIS_URL = url;
    standalone = `Docker redis:7-alpine standalone ${url}`;
  }

  let cluster: string;
  if (process.env.REDIS_CLUSTER_NODES) {
    process.env.NRL_TEST_CLUSTER_NODES = process.env.REDIS_CLUSTER_NODES;
    cluster = `REDIS_CLUSTER_NODES ${process.env.REDIS_CLUSTER_NODES}`;
  } else if (canSpawn && onPath('redis-cli')) {
    try {
      const ports = await startCluster(dir(), state.processes);
      process.env.NRL_TEST_CLUSTER_NODES = ports.map((p) => `127.0.0.1:${p}`).join(',');
      cluster = `cluster :${ports.join(',:')}`;
    } catch (error) {
      process.env.NRL_TEST_CLUSTER_ERROR = (error as Error).message;
      cluster = 'no cluster (see NRL_TEST_CLUSTER_ERROR in cluster tests)';
    }
  } else {
    process.env.NRL_TEST_CLUSTER_ERROR =
      'Cluster tests need REDIS_CLUSTER_NODES=host:port,... or redis-server and redis-cli on PATH ' +
      '(`apt-get install redis-server redis-tools` or `brew install redis`).';
    cluster = 'no cluster';
  }
  console.log(`\ntest redis: ${standalone}, ${cluster} (${Date.now() - started} ms)`);
}

function redisServerVersion(): string {
  try {
    return execFileSync('redis-server', ['--version'], { encoding: 'utf8' });
  } catch {
    return '';
  }
}
