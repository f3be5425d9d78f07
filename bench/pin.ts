/**
 * Pinning the bench's processes to cores (Linux `taskset`), so that the process measured
 * does not share its core with the one measuring it. On 2 cores: the app under load (or
 * Redis, in the store parts) on the last core; this process (the load generator, the store
 * contenders' client), its load processes and redis-benchmark on core 0. BENCH_PIN=0 turns it
 * off; it is off by itself on one core or without taskset.
 */
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';

/** The core of the process measured, and the core of the rest. */
export const MEASURED_CORE = cpus().length - 1;
export const DRIVER_CORE = 0;

function available(): boolean {
  if (process.env.BENCH_PIN === '0' || cpus().length < 2 || process.platform !== 'linux')
    return false;
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Whether processes are pinned in this run. */
export const PINNING = available();

/**
 * Pins process `pid` and all its threads to `core`; nothing when {@link PINNING} is off.
 * @throws when taskset fails on a live process
 */
export function pin(pid: number | undefined, core: number): void {
  if (!PINNING || pid === undefined) return;
  execFileSync('taskset', ['-a', '-c', '-p', String(core), String(pid)], { stdio: 'ignore' });
}

/** A line for the run's header: how processes are placed. */
export function pinningLine(): string {
  return PINNING
    ? `pinned: measured process on core ${MEASURED_CORE}, load generators on core ${DRIVER_CORE} (BENCH_PIN=0 to turn off)`
    : 'not pinned (BENCH_PIN=0, one core, or no taskset)';
}
