import type { PoolSettings } from './options.js';

/** Long-window averages before this many windows are a plain mean (Netflix's warm-up). */
const WARMUP_WINDOWS = 10;

/** How many windows back the peak of calls in flight is taken, for the app-limited cap. */
const PEAK_WINDOWS = 10;

/**
 * An adaptive concurrency limit: Gradient2, from Netflix's concurrency-limits
 * (`Gradient2Limit`), over fixed sample windows (as its `WindowedLimit` does), capped by
 * the load it serves, with an event-loop back-off. Pure and deterministic: it sees only the
 * latencies and in-flight counts it is given and the delays passed to
 * {@link Gradient2Limit.update}; no clock.
 *
 * Per window that ended, with `short` the window's mean latency, `long` the exponential
 * moving average of those means over `longWindow` windows (α = 2 / (longWindow + 1); a plain
 * mean for the first 10 windows), and `cap` the **app-limited cap**, twice the most calls in
 * flight in any of the last {@link PEAK_WINDOWS} windows (from `minLimit` to `maxLimit`):
 *
 * - when `long / short > 2` (latency came back down after a long overload), `long ×= 0.95`,
 *   so the long window forgets the overload;
 * - when no call ended in the window, or the load did not reach the limit at a short
 *   latency within `rttTolerance × long`, the window is app-limited: the load, not the
 *   limit, bounded concurrency. The limit comes down to `cap` if above it, or halves its
 *   distance to it (snapping within 1), so it tracks what the load uses: an overload starts
 *   near what the load needed, not from a limit it never filled. `cap` under a light load
 *   is the **unloaded limit**;
 * - when fewer than `limit / 2` calls were in flight at a latency past the tolerance, the
 *   limit is kept (too few calls to judge it);
 * - else `gradient = clamp(rttTolerance × long / short, 0.5, 1)`,
 *   `estimate = limit × gradient + headroom(limit)`,
 *   `limit = clamp(limit × (1 − smoothing) + estimate × smoothing, minLimit, cap)`.
 *
 * So a load that fills the limit at a steady latency grows it by `smoothing × headroom` per
 * window (the cap is then at least twice the limit), a latency above `rttTolerance × long`
 * lowers it (at most by half of `smoothing` per window), and a window whose event-loop delay
 * is above `maxEventLoopDelayMs` multiplies it by `eventLoopBackoff` instead (floored at
 * `minLimit`): a CPU-bound process delays its timers before its latencies show the queue in
 * its sockets.
 */
export class Gradient2Limit {
  private estimate: number;
  private long = 0;
  private windows = 0;
  private sum = 0;
  private count = 0;
  private maxInFlight = 0;
  /** The most calls in flight in each of the last {@link PEAK_WINDOWS} windows, a ring. */
  private readonly peaks: number[] = [];
  private next = 0;

  constructor(private readonly settings: PoolSettings) {
    this.estimate = settings.initialLimit;
  }

  /**
   * The app-limited cap: twice the most calls in flight over the last {@link PEAK_WINDOWS}
   * windows, from `minLimit` to `maxLimit`.
   */
  get cap(): number {
    const s = this.settings;
    return Math.max(s.minLimit, Math.min(s.maxLimit, 2 * Math.max(0, ...this.peaks)));
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
    this.peaks[this.next] = maxInFlight;
    this.next = (this.next + 1) % PEAK_WINDOWS;
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
    const healthy = short <= s.rttTolerance * this.long;
    if (healthy && maxInFlight < this.limit) return this.rest();
    // Too few calls in flight for their latency to say anything of the limit.
    if (maxInFlight < this.estimate / 2) return this.limit;
    const gradient =
      short > 0 ? Math.max(0.5, Math.min(1, (s.rttTolerance * this.long) / short)) : 1;
    const next = this.estimate * gradient + s.headroom(this.estimate);
    // The limit is full yet the latency no higher than usual: no queue at all, so it
    // takes its whole headroom, not the smoothed share (from the floor, 5, to 50 in 10 windows).
    const weight = short <= this.long ? 1 : s.smoothing;
    const smoothed = this.estimate * (1 - weight) + next * weight;
    this.estimate = Math.max(s.minLimit, Math.min(this.cap, smoothed));
    return this.limit;
  }

  /**
   * An app-limited window: the limit comes down to the cap, or halves its distance to it,
   * snapping to it within 1. So after an overload, while the light load that follows stays
   * under the limit at a healthy latency, the limit is back at or above its unloaded value
   * (twice that load's peak) within ⌊log2(cap − minLimit)⌋ + 1 windows: 7 for a cap of 100,
   * 10 for 1000. A light load the lowered limit does not hold grows it as a busy one does.
   */
  private rest(): number {
    const cap = this.cap;
    if (this.estimate > cap) this.estimate = cap;
    else {
      const next = this.estimate + (cap - this.estimate) / 2;
      this.estimate = cap - next < 1 ? cap : next;
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
