import type { PoolSettings } from './options.js';

/** Long-window averages before this many windows are a plain mean (Netflix's warm-up). */
const WARMUP_WINDOWS = 10;

/**
 * An adaptive concurrency limit: Gradient2, from Netflix's concurrency-limits
 * (`Gradient2Limit`), over fixed sample windows (as its `WindowedLimit` does), with an
 * event-loop back-off. Pure and deterministic: it sees only the latencies and in-flight
 * counts it is given and the delays passed to {@link Gradient2Limit.update}; no clock.
 *
 * Per window that ended with samples, with `short` the window's mean latency and `long` the
 * exponential moving average of those means over `longWindow` windows
 * (α = 2 / (longWindow + 1); a plain mean for the first 10 windows):
 *
 * - when `long / short > 2` (latency came back down after a long overload), `long ×= 0.95`,
 *   so the long window forgets the overload;
 * - when no call ended in the window, or the most calls in flight during it were below
 *   `limit / 2` at a short latency within `rttTolerance × long`, the window is quiet: the
 *   load, not the limit, bounded concurrency, so latency says nothing about it. A limit an
 *   overload pushed below `initialLimit` (the unloaded limit) halves its distance to it per
 *   quiet window; one above it is kept. Below `limit / 2` at a latency past the tolerance, the
 *   limit is kept;
 * - else `gradient = clamp(rttTolerance × long / short, 0.5, 1)`,
 *   `estimate = limit × gradient + headroom(limit)`,
 *   `limit = clamp(limit × (1 − smoothing) + estimate × smoothing, minLimit, maxLimit)`.
 *
 * So a steady latency grows the limit by `smoothing × headroom` per busy window until the
 * load no longer fills half of it, a latency above `rttTolerance × long` lowers it (at most
 * by half of `smoothing` per window), and a window whose event-loop delay is above
 * `maxEventLoopDelayMs` multiplies it by `eventLoopBackoff` instead (floored at `minLimit`):
 * a CPU-bound process delays its timers before its latencies show the queue in its sockets.
 */
export class Gradient2Limit {
  private estimate: number;
  private long = 0;
  private windows = 0;
  private sum = 0;
  private count = 0;
  private maxInFlight = 0;

  constructor(private readonly settings: PoolSettings) {
    this.estimate = settings.initialLimit;
  }

  /** The limit now: how many calls may be in flight, an integer from `minLimit` to `maxLimit`. */
  get limit(): number {
    return Math.max(this.settings.minLimit, Math.floor(this.estimate));
  }

  /** The long-window latency, in **ms** (0 before the first window). */
  get longRttMs(): number {
    return this.long;
  }

  /**
   * One call ended: its latency, in **ms**, and how many calls were in flight when it
   * ended (itself included).
   */
  sample(rttMs: number, inFlight: number): void {
    this.sum += rttMs;
    this.count++;
    if (inFlight > this.maxInFlight) this.maxInFlight = inFlight;
  }

  /**
   * Ends a window: updates the limit from its samples, or from `eventLoopDelayMs` (the
   * event loop's delay in the window, in **ms**; undefined when not watched) when it is
   * above `maxEventLoopDelayMs`. Returns the new limit.
   */
  update(eventLoopDelayMs?: number): number {
    const { count, sum, maxInFlight } = this;
    this.sum = this.count = this.maxInFlight = 0;
    const s = this.settings;
    if (eventLoopDelayMs !== undefined && eventLoopDelayMs > s.maxEventLoopDelayMs) {
      this.estimate = Math.max(s.minLimit, this.estimate * s.eventLoopBackoff);
      // The window's latencies still teach the long average what the load costs.
      if (count > 0) this.learn(sum / count);
      return this.limit;
    }
    if (count === 0) return this.rest();
    const short = sum / count;
    this.learn(short);
    if (maxInFlight < this.estimate / 2) {
      return short <= s.rttTolerance * this.long ? this.rest() : this.limit;
    }
    const gradient =
      short > 0 ? Math.max(0.5, Math.min(1, (s.rttTolerance * this.long) / short)) : 1;
    const next = this.estimate * gradient + s.headroom(this.estimate);
    const smoothed = this.estimate * (1 - s.smoothing) + next * s.smoothing;
    this.estimate = Math.max(s.minLimit, Math.min(s.maxLimit, smoothed));
    return this.limit;
  }

  /**
   * A quiet window: no call ended in it, or the load filled less than half of the limit at a
   * latency within the tolerance. A limit an overload pushed below `initialLimit` (the
   * unloaded limit) halves its distance to it, snapping to it within 1: from the default
   * floor (5) to the default 20 in 4 windows. Above `initialLimit` it is kept.
   */
  private rest(): number {
    const { initialLimit } = this.settings;
    if (this.estimate < initialLimit) {
      const next = this.estimate + (initialLimit - this.estimate) / 2;
      this.estimate = initialLimit - next < 1 ? initialLimit : next;
    }
    return this.limit;
  }

  private learn(short: number): void {
    this.windows++;
    if (this.windows <= WARMUP_WINDOWS) {
      this.long += (short - this.long) / this.windows;
      return;
    }
    const alpha = 2 / (this.settings.longWindow + 1);
    // A window past the tolerance is the queue this limit is there to bound: learnt at a
    // tenth of the rate, so a sustained overload does not become the new normal.
    const queueing = short > this.settings.rttTolerance * this.long;
    this.long += (short - this.long) * (queueing ? alpha / 10 : alpha);
    if (short > 0 && this.long / short > 2) this.long *= 0.95;
  }
}
