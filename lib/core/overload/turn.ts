import type { OverloadClock } from './clock.js';

/**
 * How long the event loop's current turn has been busy: from the first call admitted or
 * shed in it (one clock read per call), until a `setImmediate` scheduled by that first call
 * runs, which Node does once the turn's I/O callbacks are over. A call seen when the turn has
 * been busy for `t` ms was ready when the turn began (libuv takes the sockets ready at the
 * start of its poll phase) and has waited at least `t` ms behind the calls run before it: the
 * queue a synchronous handler builds, which no concurrency limit sees (a CPU-bound handler is
 * never more than one call in flight). Shedding on it bounds that wait per call, as CoDel
 * bounds a packet's time in a queue, with no window to swing on.
 */
export class LoopTurn {
  private startedAt: number | undefined;
  private readonly over = () => {
    this.startedAt = undefined;
  };

  constructor(private readonly clock: OverloadClock) {}

  /** How long the current turn has been busy, in **ms** (0 for its first call). */
  busyMs(): number {
    const now = this.clock.now();
    if (this.startedAt === undefined) {
      this.startedAt = now;
      this.clock.setImmediate(this.over);
      return 0;
    }
    return now - this.startedAt;
  }
}
