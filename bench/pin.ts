/**
 * Pinning the bench's processes to cores (Linux `taskset`), so that the process measured
 * does not share its core with the one measuring it. On 2 cores: the app under load (or
 * Redis, in the store parts) on the last core; this process (the load generator, the store
 * contenders' client), its load processes and redis-benchmark on core 0. BENCH_PIN=1 turns it
 * on (off by default: two pinned and two unpinned runs on a 2-core VM repeated no better);
 * it stays off on one allowed core or without taskset.
 */
import { execFileSync } from 'node:child_process';

/** The cores this process may run on (`taskset -cp`), or undefined when pinning is off. */
function allowedCores(): number[] | undefined {
  if (process.env.BENCH_PIN !== '1' || process.platform !== 'linux') return undefined;
  try {
    const out = execFileSync('taskset', ['-cp', String(process.pid)], { encoding: 'utf8' });
    // "pid 123's current affinity list: 0,2-3"
    const list = out.slice(out.lastIndexOf(':') + 1).trim();
    const cores = list.split(',').flatMap((part) => {
      const [from, to = from] = part.split('-').map(Number);
      return Array.from({ length: to! - from! + 1 }, (_, i) => from! + i);
    });
    return cores.length >= 2 && cores.every(Number.isInteger) ? cores : undefined;
  } catch {
    return undefined;
  }
}

const cores = allowedCores();

/** Whether processes are pinned in this run: two allowed cores or more, and taskset. */
export const PINNING = cores !== undefined;
/** The core of the process measured (the last allowed), and the core of the rest (the first). */
export const MEASURED_CORE = cores?.at(-1) ?? 0;
export const DRIVER_CORE = cores?.[0] ?? 0;

/**
 * Pins process `pid` and all its threads to `core`; nothing when {@link PINNING} is off.
 * Returns whether it did: a process that taskset could not pin (gone, or a core taken away
 * since) runs where the scheduler puts it, and the run says so.
 */
export function pin(pid: number | undefined, core: number): boolean {
  if (!PINNING || pid === undefined) return false;
  try {
    execFileSync('taskset', ['-a', '-c', '-p', String(core), String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    console.log(`! could not pin process ${pid} to core ${core}: it runs unpinned`);
    return false;
  }
}

/** A line for the run's header: how processes are placed. */
export function pinningLine(): string {
  return PINNING
    ? `pinned (BENCH_PIN=1): measured process on core ${MEASURED_CORE}, load generators on core ${DRIVER_CORE}`
    : 'not pinned (BENCH_PIN=1 pins, given two allowed cores and taskset)';
}
