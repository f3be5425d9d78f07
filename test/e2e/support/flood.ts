/**
 * Runs the flood of bench/flood/load.ts (keep-alive sockets from one client, and probes of
 * another client already refused) in an OS process of its own, so the load never shares the
 * app's event loop, and resolves with what it saw.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const LOAD = fileURLToPath(new URL('../../../bench/flood/load.ts', import.meta.url));

interface FloodTally {
  /** 2xx with rate-limit headers: decided by the store. */
  admitted: number;
  /** 2xx without them: admitted without a decision (fail-open). */
  failOpen: number;
  refused: number;
  other: number;
}

export interface FloodResult {
  flood: FloodTally;
  ms: number;
  probeBefore?: FloodTally;
  probes?: FloodTally;
  /** What the `other` answers were: status codes and error codes, with their counts. */
  otherKinds?: Record<string, number>;
}

export interface FloodOptions {
  connections: number;
  requests: number;
  /** Requests of a second client (127.0.0.2), already refused, spread over the flood. */
  probes?: number;
}

export async function flood(url: string, options: FloodOptions): Promise<FloodResult> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx/esm', LOAD, JSON.stringify({ url, ...options })],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const last = out.trim().split('\n').pop();
  if (code !== 0 || !last) throw new Error(`the flood exited ${code}:\n${out}\n${err}`);
  return JSON.parse(last) as FloodResult;
}
