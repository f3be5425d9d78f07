import { Gradient2Limit } from './gradient.js';
import type { OverloadClock } from './clock.js';
import type { PoolSettings } from './options.js';
import type { LoopTurn } from './turn.js';
import { rankOf, type Priority } from './types.js';

const isThenable = (value: unknown): value is Promise<unknown> => value instanceof Promise;

/**
 * The event loop's utilisation over a window (the share of it the loop spent running
 * callbacks, `performance.eventLoopUtilization`) above which the window counts as busy; after
 * {@link BUSY_WINDOWS} busy windows in a row, turns are held to `maxTurnMs` and the delay
 * sheds: a loop that busy that long has a queue in its sockets, while a long turn of an
 * idle loop is one burst, which the next turns absorb.
 */
const BUSY_UTILIZATION = 0.9;

/**
 * How many windows in a row the loop must have been busy in for the turn's budget and the
 * delay to shed: longer than a cold process's burst (its first calls compile the code they
 * run, which can hold a loaded machine's loop for a window), short enough that an overload
 * is bounded within 200 ms (three windows let a queue build at 4× that never drained).
 */
const BUSY_WINDOWS = 2;

/**
 * What shed a call: the concurrency `limit` (or the queue), the `turn_budget` (`maxTurnMs`),
 * or the `event_loop_delay` (`maxEventLoopDelayMs`).
 */
export type ShedSignal = 'limit' | 'turn_budget' | 'event_loop_delay';

/** What a pool reports as it admits and sheds, for metrics and logs. */
export interface AdmissionListener {
  /** A call was shed, by `signal`. */
  shed(pool: string, priority: Priority, signal: ShedSignal): void;
  /** A call left the queue after `waitedMs` **ms**, admitted or shed. */
  waited(pool: string, priority: Priority, waitedMs: number, admitted: boolean): void;
}

/**
 * A call admitted: its slot is held until {@link Ticket.end}. The latency sample runs from
 * admission, or from the last {@link Ticket.restart}, to `end`.
 */
export interface Ticket {
  readonly priority: Priority;
  /** Starts the latency sample afresh (the handler starts now). */
  restart(): void;
  /** Gives the slot back with a latency sample; only the first `end` or `drop` counts. */
  end(): void;
  /** Gives the slot back without a sample (the call was refused by something else). */
  drop(): void;
}

interface Waiter {
  readonly priority: Priority;
  readonly rank: number;
  readonly since: number;
  readonly resolve: (ticket: Ticket | undefined) => void;
  timer: unknown;
}

/** Calls queued longest ago first; the rank of each in `queues`. */
type Queues = [Waiter[], Waiter[], Waiter[]];

/**
 * One pool's admission: calls in flight per priority against an adaptive limit
 * ({@link Gradient2Limit}). Rules, per call of priority `p`, with `limit` the pool's limit
 * and `level` the event loop's pressure, the higher of two: its delay over the last window
 * (0 below `maxEventLoopDelayMs`, 1 above it, 2 above twice it, 3 above four times it), and
 * how long its current turn has been busy when
 * the call is seen ({@link LoopTurn}: 0 up to `maxTurnMs`, 1 above it, 2 above twice it, 3
 * above four times it; only while a shed call costs the turn at most half what an admitted
 * one does, {@link LoopTurn.shedPays}); both only while the loop is busy: its utilisation above
 * {@link BUSY_UTILIZATION} in each of the last {@link BUSY_WINDOWS} windows, each of which
 * saw a call (or, when not measured, the delay alone). So the burst of an idle process is never shed by them:
 *
 * - `critical`: admitted while fewer than `ceil(criticalCap × limit)` calls are in flight,
 *   else shed; never queued, never shed for the event loop;
 * - others: shed when `level > rank(p)` (`sheddable` from level 1, `normal` from 2, `high`
 *   from 3); else admitted while fewer than `limit` calls are in flight and no call of
 *   equal or higher priority waits;
 * - at the limit, `sheddable` is shed; `high` and `normal` wait up to `queueMs` for a slot
 *   (`high` first, each priority in arrival order), and are shed when it passes. A full
 *   queue (`maxQueued`) sheds its newest call of the lowest priority below the newcomer's,
 *   or else the newcomer.
 *
 * So the lowest priority present is always the first shed.
 */
export class AdmissionPool {
  readonly limiter: Gradient2Limit;
  /** Calls in flight, by rank (0 `sheddable` to 3 `critical`). */
  readonly inFlight = [0, 0, 0, 0];
  private total = 0;
  private queued = 0;
  private readonly queues: Queues = [[], [], []];
  /** The event loop's pressure level from its delay, 0 to 3 (see above). */
  private level = 0;
  /** Whether the last windows showed a busy loop, so that the turn's budget applies. */
  private busy = false;
  /** How many windows in a row, up to the last, the loop was busy in with calls. */
  private busyRun = 0;
  /** Whether a call was seen since the last window ended. */
  private called = false;
  /** Tickets not ended yet, oldest first: those past `leaseMs` are let go. */
  private readonly live = new Set<PoolTicket>();

  constructor(
    readonly name: string,
    private readonly settings: PoolSettings,
    private readonly clock: OverloadClock,
    private readonly listener: AdmissionListener,
    private readonly turn?: LoopTurn,
  ) {
    this.limiter = new Gradient2Limit(settings);
  }

  /** Calls in flight, every priority. */
  get inFlightTotal(): number {
    return this.total;
  }

  /** Calls waiting for a slot. */
  get waiting(): number {
    return this.queued;
  }

  /**
   * Admits a call of `priority`: its ticket, or undefined when it is shed. A promise only
   * when it waits in the queue.
   */
  acquire(priority: Priority): Ticket | undefined | Promise<Ticket | undefined> {
    this.called = true;
    const turn = this.turn;
    if (turn === undefined) return this.decide(priority, 0);
    // Read for every call, critical included, so the turn is timed from its first call.
    const outcome = this.decide(priority, turn.busyMs());
    turn.settled(
      outcome === undefined ? true : isThenable(outcome) ? undefined : false,
      rankOf(priority),
    );
    return outcome;
  }

  private decide(
    priority: Priority,
    busy: number,
  ): Ticket | undefined | Promise<Ticket | undefined> {
    const rank = rankOf(priority);
    const limit = this.limiter.limit;
    if (rank === 3) {
      if (this.total < Math.ceil(this.settings.criticalCap * limit)) return this.admit(priority);
      return this.shed(priority, 'limit');
    }
    if (this.level > rank) return this.shed(priority, 'event_loop_delay');
    // Only where a shed call costs the turn less than the call it refuses: else shedding
    // shortens no turn (a trivial handler's 503 costs the loop more than its answer).
    if (
      this.busy &&
      turnLevel(busy, this.settings.maxTurnMs) > rank &&
      this.turn?.shedPays(rank) !== false
    ) {
      return this.shed(priority, 'turn_budget');
    }
    if (this.total < limit && !this.waitingAtOrAbove(rank)) return this.admit(priority);
    if (rank === 0 || this.settings.queueMs === 0) return this.shed(priority, 'limit');
    return this.enqueue(priority, rank);
  }

  /**
   * Ends a window (see {@link Gradient2Limit.update}): a new limit, the event loop's
   * pressure, and waiting calls admitted if the limit rose. `utilization` is the loop's
   * utilisation over the window, from 0 to 1 (undefined when not measured: not busy).
   * Returns the limit.
   */
  update(eventLoopDelayMs?: number, utilization?: number): number {
    const expired = this.clock.now() - this.settings.leaseMs;
    for (const ticket of this.live) {
      if (ticket.admittedAt > expired) break;
      ticket.drop();
    }
    const limit = this.limiter.update(eventLoopDelayMs);
    const max = this.settings.maxEventLoopDelayMs;
    const delay = eventLoopDelayMs ?? 0;
    // A late loop not busy for long was stalled (a cold process's first burst, a garbage
    // collection), not loaded: it sheds nothing. Not measured: the delay alone.
    // A window without a call was busy with something else (the app's own bootstrap): no load.
    const busyWithCalls = this.called && (utilization ?? 0) > BUSY_UTILIZATION;
    this.called = false;
    this.busyRun = busyWithCalls ? this.busyRun + 1 : 0;
    const loaded = utilization === undefined || this.busyRun >= BUSY_WINDOWS;
    this.level = !loaded ? 0 : delay > 4 * max ? 3 : delay > 2 * max ? 2 : delay > max ? 1 : 0;
    this.busy = this.level > 0 || this.busyRun >= BUSY_WINDOWS;
    // Waiting calls the loop's pressure now sheds go at once.
    for (let rank = 1; rank < this.level && rank < 3; rank++) {
      for (const w of this.queues[rank]!.splice(0)) this.leave(w, undefined, 'event_loop_delay');
    }
    this.drain();
    return limit;
  }

  private admit(priority: Priority): Ticket {
    const rank = rankOf(priority);
    this.inFlight[rank]!++;
    this.total++;
    const ticket = new PoolTicket(this, priority, rank, this.clock.now());
    this.live.add(ticket);
    return ticket;
  }

  /** Called by a ticket, once. */
  release(ticket: PoolTicket, rank: number, startedAt: number | undefined): void {
    this.live.delete(ticket);
    this.inFlight[rank]!--;
    this.total--;
    if (startedAt !== undefined) {
      this.limiter.sample(Math.max(0, this.clock.now() - startedAt), this.total + 1);
    }
    this.drain();
  }

  /** The clock's time, for tickets. */
  now(): number {
    return this.clock.now();
  }

  private shed(priority: Priority, signal: ShedSignal): undefined {
    this.listener.shed(this.name, priority, signal);
    return undefined;
  }

  private waitingAtOrAbove(rank: number): boolean {
    for (let r = rank; r < 3; r++) if (this.queues[r]!.length > 0) return true;
    return false;
  }

  private enqueue(priority: Priority, rank: number): Promise<Ticket | undefined> | undefined {
    if (this.queued >= this.settings.maxQueued) {
      // The newest call of the lowest priority below the newcomer's makes room.
      let evicted: Waiter | undefined;
      for (let r = 1; r < rank && evicted === undefined; r++) evicted = this.queues[r]!.pop();
      if (evicted === undefined) return this.shed(priority, 'limit');
      this.queued--;
      this.leave(evicted, undefined, 'limit', false);
    }
    return new Promise((resolve) => {
      const waiter: Waiter = { priority, rank, since: this.clock.now(), resolve, timer: undefined };
      waiter.timer = this.clock.setTimeout(() => {
        const queue = this.queues[rank]!;
        const at = queue.indexOf(waiter);
        if (at === -1) return;
        queue.splice(at, 1);
        this.leave(waiter, undefined, 'limit');
      }, this.settings.queueMs);
      this.queues[rank]!.push(waiter);
      this.queued++;
    });
  }

  /**
   * Sheds every waiting call and clears its timer (at shutdown): none is left to resolve
   * against a closed app, and no timer of the queue keeps the process alive.
   */
  close(): void {
    for (const queue of this.queues) {
      for (const waiter of queue.splice(0)) this.leave(waiter, undefined, 'limit');
    }
  }

  /** Admits waiting calls, highest priority first, while the limit has room. */
  private drain(): void {
    if (this.queued === 0) return;
    while (this.total < this.limiter.limit) {
      const next = this.queues[2]!.shift() ?? this.queues[1]!.shift();
      if (next === undefined) return;
      this.leave(next, this.admit(next.priority), 'limit');
    }
  }

  /**
   * A waiting call leaves the queue, with its ticket or shed.
   * @param signal what sheds it, when it is shed
   * @param counted false when the caller already took it off `queued`
   */
  private leave(
    waiter: Waiter,
    ticket: Ticket | undefined,
    signal: ShedSignal,
    counted = true,
  ): void {
    if (counted) this.queued--;
    this.clock.clearTimeout(waiter.timer);
    this.listener.waited(this.name, waiter.priority, this.clock.now() - waiter.since, !!ticket);
    if (ticket === undefined) this.listener.shed(this.name, waiter.priority, signal);
    waiter.resolve(ticket);
  }
}

/** The pressure of a turn busy for `busyMs`, against `maxTurnMs` (both in **ms**): 0 to 3. */
function turnLevel(busyMs: number, maxTurnMs: number): number {
  if (busyMs <= maxTurnMs) return 0;
  return busyMs > 4 * maxTurnMs ? 3 : busyMs > 2 * maxTurnMs ? 2 : 1;
}

class PoolTicket implements Ticket {
  private over = false;
  private startedAt: number;

  constructor(
    private readonly pool: AdmissionPool,
    readonly priority: Priority,
    private readonly rank: number,
    readonly admittedAt: number,
  ) {
    this.startedAt = admittedAt;
  }

  restart(): void {
    this.startedAt = this.pool.now();
  }

  end(): void {
    if (this.over) return;
    this.over = true;
    this.pool.release(this, this.rank, this.startedAt);
  }

  drop(): void {
    if (this.over) return;
    this.over = true;
    this.pool.release(this, this.rank, undefined);
  }
}
