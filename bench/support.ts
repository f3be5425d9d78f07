/** What every part of the benchmark shares: a private Redis, medians and tables. */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface PrivateRedis {
  readonly url: string;
  readonly port: number;
  /** The redis-server process's id. */
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

/**
 * A private redis-server (from the PATH) on a free port, without persistence, so that
 * nothing else competes for it and its command statistics are ours alone.
 * @throws when redis-server is missing or exits before it is ready
 */
export async function startRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const kill = () => child.kill('SIGKILL');
  process.on('exit', kill);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    let output = '';
    child.once('error', reject); // e.g. not on the PATH
    void exited.then(() => reject(new Error(`redis-server exited:\n${output}`)));
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      if (output.includes('Ready to accept connections')) resolve();
    });
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid,
    stop: async () => {
      process.off('exit', kill);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/**
 * How far a ratio's rounds may spread around their median, as a share of it, before the
 * ratio is flagged: issue 37's ±15% between runs.
 */
export const SPREAD = 0.15;

/**
 * A ratio paired per round: `add[i] / base[i]` for each round, the median of those, and
 * whether they spread beyond ±{@link SPREAD} of it (`~` in the tables). Rounds whose base is 0
 * or less (noise on a variant that adds next to nothing) give no ratio.
 */
export function pairedRatio(
  add: readonly number[],
  base: readonly number[],
): { median: number; min: number; max: number; spread: boolean } | undefined {
  const ratios = add.flatMap((a, i) => (base[i]! > 0 ? [a / base[i]!] : []));
  if (ratios.length === 0 || ratios.length < add.length) return undefined;
  const mid = median(ratios);
  const [min, max] = [Math.min(...ratios), Math.max(...ratios)];
  const bound = SPREAD * Math.abs(mid);
  return { median: mid, min, max, spread: max - mid > bound || mid - min > bound };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Renders rows as an aligned text table; numbers are right-aligned. */
export function table(header: readonly string[], rows: readonly (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, c) => Math.max(...cells.map((r) => (r[c] ?? '').length)));
  const line = (r: readonly string[], numeric: boolean[]) =>
    r
      .map((cell, c) => (numeric[c] ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join('  ')
      .trimEnd();
  const numeric = header.map((_, c) => rows.length > 0 && typeof rows[0]![c] === 'number');
  return [
    line(header, numeric),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map((r) => line(r.map(String), numeric)),
  ].join('\n');
}

/** Rounds for display: 3 significant digits at most, never in exponent form. */
export function fmt(value: number, digits = 3): number {
  if (!Number.isFinite(value) || value === 0) return value;
  const scale = 10 ** Math.max(0, digits - 1 - Math.floor(Math.log10(Math.abs(value))));
  return Math.round(value * scale) / scale;
}
