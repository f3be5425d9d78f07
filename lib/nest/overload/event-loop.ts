import {
  monitorEventLoopDelay,
  performance,
  type EventLoopUtilization,
  type IntervalHistogram,
} from 'node:perf_hooks';

/** The histogram's sampling period, in **ms** (Node's default); its samples include it. */
const RESOLUTION_MS = 10;

/**
 * The event loop's delay, read once per window: the mean of `perf_hooks`'
 * `monitorEventLoopDelay` over the window beyond its 10 ms sampling period, or how late the
 * window's own timer fired, whichever is larger (a loop blocked for the whole window records
 * no sample at all).
 */
export class EventLoopDelay {
  private histogram: IntervalHistogram | undefined;
  private last = 0;

  start(now: number): void {
    this.histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    this.histogram.enable();
    this.last = now;
  }

  /** The delay since the last read, in **ms**; `windowMs` is how long that should have been. */
  read(now: number, windowMs: number): number {
    const late = Math.max(0, now - this.last - windowMs);
    this.last = now;
    const h = this.histogram;
    if (h === undefined) return late;
    const mean = h.count > 0 ? Math.max(0, h.mean / 1e6 - RESOLUTION_MS) : 0;
    h.reset();
    return Math.max(mean, late);
  }

  stop(): void {
    this.histogram?.disable();
    this.histogram = undefined;
  }
}

/**
 * The event loop's utilisation, read once per window: the share of the window it spent
 * running callbacks, from 0 to 1 (`perf_hooks`' `performance.eventLoopUtilization`).
 */
export class LoopUtilization {
  private last: EventLoopUtilization | undefined;

  start(): void {
    this.last = performance.eventLoopUtilization();
  }

  /** The utilisation since the last read (or start), from 0 to 1. */
  read(): number {
    const now = performance.eventLoopUtilization();
    const since = this.last === undefined ? now : performance.eventLoopUtilization(now, this.last);
    this.last = now;
    return since.utilization;
  }
}
