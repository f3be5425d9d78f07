import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { sleep } from './traffic.js';

/** The sample app as a child process. */
export interface RunningApp {
  url: string;
  /** Lines the app logged (colours off). */
  log: string[];
  stop(): Promise<void>;
}

const MAIN = fileURLToPath(new URL('../sample-app/main.js', import.meta.url));
const READY_WITHIN_MS = 20_000;
const STOP_WITHIN_MS = 5000;

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Starts the compiled sample app on a free port (it inherits `REDIS_URL` and `PLATFORM`,
 * unless `env` says otherwise) and resolves once `/health` answers. `main` is the compiled
 * entry point, for callers that do not sit next to it.
 * @throws when the app exits or is not ready within 20 s, with its log
 */
export async function startApp(
  options: { main?: string; env?: Record<string, string> } = {},
): Promise<RunningApp> {
  const port = await freePort();
  const child = spawn(process.execPath, [options.main ?? MAIN], {
    env: { ...process.env, ...options.env, PORT: String(port), NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log: string[] = [];
  for (const stream of [child.stdout, child.stderr])
    stream
      .setEncoding('utf8')
      .on('data', (chunk: string) => log.push(...chunk.trimEnd().split('\n')));
  // If the demo dies, the app must not outlive it.
  const orphanGuard = () => child.kill('SIGKILL');
  process.on('exit', orphanGuard);
  const app: RunningApp = {
    url: `http://127.0.0.1:${port}`,
    log,
    stop: async () => {
      process.off('exit', orphanGuard);
      await stop(child);
    },
  };
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  if (await waitHealthy(app.url, READY_WITHIN_MS, exited)) return app;
  await app.stop();
  throw new Error(`the sample app did not become ready:\n${log.join('\n')}`);
}

/**
 * Polls `<url>/health` until it answers 2xx: true, or false after `withinMs` or once
 * `gaveUp()` says there is no point waiting (the app exited).
 */
export async function waitHealthy(
  url: string,
  withinMs: number,
  gaveUp: () => boolean = () => false,
): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline && !gaveUp()) {
    const healthy = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (healthy) return true;
    await sleep(100);
  }
  return false;
}

/** SIGTERM (the app shuts down gracefully), then SIGKILL if it takes too long. */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_WITHIN_MS);
  await exited;
  clearTimeout(timer);
}
