/** The apps of the HTTP benchmark: one process per variant, its CPU time read from /proc. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MEASURED_CORE, pin } from '../pin.js';
import { freePort } from '../support.js';

const APP = fileURLToPath(new URL('./app.js', import.meta.url));
// Apps boot side by side (eight at a time on two cores): on a busy machine that takes a while.
const READY_TIMEOUT_MS = 60_000;

/** Apps still running, killed should this process exit without stopping them. */
const running = new Set<ChildProcess>();
let exitHooked = false;

function killOnExit(child: ChildProcess): void {
  // One listener for all: one per app would trip Node's MaxListeners warning.
  if (!exitHooked) process.once('exit', () => running.forEach((c) => c.kill('SIGKILL')));
  exitHooked = true;
  running.add(child);
  child.once('exit', () => running.delete(child));
}

export interface App {
  variant: string;
  /** CPU time the app has used so far, in µs (NaN where /proc is missing). */
  cpuUs(): number;
  url: string;
  /** The app's process: its IPC channel answers what the app offers (the overload part's samples). */
  child: ChildProcess;
  /** Throws, with the app's output, when it has died. */
  assertAlive(): void;
  stop(): Promise<void>;
}

/** Another benchmark's app, started the same way (the overload part's, bench/overload/app.ts). */
export interface AppScript {
  /** The compiled app, run with `<platform> <variant> <port> <redisUrl> ...args`. */
  path: string;
  args?: readonly string[];
  /** The path {@link App.url} names. Default `/hi`. */
  urlPath?: string;
}

/**
 * Starts one app and waits until it listens. `packageEntry`: the built package it loads
 * instead of the current one (an `@base` twin's, see baseline.ts). `script`: another app than
 * this part's.
 */
export async function startApp(
  platform: string,
  variant: string,
  redisUrl: string,
  packageEntry?: string,
  script: AppScript = { path: APP },
): Promise<App> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(platform, variant, redisUrl, packageEntry, script);
    } catch (error) {
      // The free port was taken before the app listened (another process's connection, on a
      // busy machine): another port.
      const taken = error instanceof Error && error.message.includes('EADDRINUSE');
      if (!taken || attempt === 3) throw error;
    }
  }
}

async function startOnce(
  platform: string,
  variant: string,
  redisUrl: string,
  packageEntry: string | undefined,
  script: AppScript,
): Promise<App> {
  const port = await freePort();
  // The IPC channel lets the app notice when this process dies without stopping it.
  const args = [script.path, platform, variant, String(port), redisUrl, ...(script.args ?? [])];
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: packageEntry ? { ...process.env, BENCH_NRL_ENTRY: packageEntry } : process.env,
  });
  pin(child.pid, MEASURED_CORE);
  const output: string[] = [];
  // 'close': after the exit and the last of its output, which a failed start is told by.
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const dead = () => child.exitCode !== null || child.signalCode !== null;
  const kill = () => child.kill('SIGKILL');
  killOnExit(child);
  const describe = () => `${variant} on ${platform}`;
  const app: App = {
    variant,
    cpuUs: () => processCpuUs(child.pid),
    url: `http://127.0.0.1:${port}${script.urlPath ?? '/hi'}`,
    child,
    assertAlive() {
      if (dead())
        throw new Error(
          `${describe()} died (${child.exitCode ?? child.signalCode}):\n${output.join('')}`,
        );
    },
    async stop() {
      if (!dead()) {
        child.kill('SIGTERM');
        const timer = setTimeout(kill, 2000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`${describe()} not ready in ${READY_TIMEOUT_MS} ms:\n${output.join('')}`),
          ),
        READY_TIMEOUT_MS,
      );
      // Piped, as stdio says; the four-slot form of spawn() types them as nullable.
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => output.push(chunk));
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        output.push(chunk);
        if (/^ready$/m.test(output.join(''))) {
          clearTimeout(timer);
          resolve();
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`${describe()} exited before ready:\n${output.join('')}`));
      });
    });
  } catch (error) {
    await app.stop();
    throw error;
  }
  return app;
}

/** utime + stime of a process, in µs, from /proc/<pid>/stat (ticks of 1/100 s). */
function processCpuUs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return NaN;
  }
}
