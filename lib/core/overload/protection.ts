import { AdmissionPool, type ShedSignal, type Ticket } from './admission.js';
import { SYSTEM_CLOCK, type OverloadClock } from './clock.js';
import type { OverloadSettings } from './options.js';
import { LoopTurn } from './turn.js';
import { PRIORITIES, type Priority } from './types.js';

/** How long without a shed call ends a shedding episode, in **ms**. */
const SHEDDING_QUIET_MS = 2000;

/** The process's pool's name, where routes name none. */
export const PROCESS_POOL = 'process';

/** Shed calls by priority. */
export type ShedCounts = Record<Priority, number>;

/** What a shedding episode reports when it starts and when it stops. */
export interface SheddingEpisode {
  /** The pool that shed first (start), or every pool that shed (stop). */
  pools: string[];
  /** Shed calls by priority in the episode so far (1 at the start). */
  shed: ShedCounts;
  /** At the start: what shed the first call. */
  signal?: ShedSignal;
  /** The process pool's limit and calls in flight when reported. */
  limit: number;
  inFlight: number;
  /** At the stop: from the first shed call to the last, in whole **ms**. */
  durationMs?: number;
}

/** What {@link OverloadProtection} tells as it works: every member optional. */
export interface OverloadListener {
  /** A call was shed, by `signal`. */
  shed?(pool: string, priority: Priority, signal: ShedSignal): void;
  /** A call left the queue after `waitedMs` **ms**, admitted or shed. */
  waited?(pool: string, priority: Priority, waitedMs: number, admitted: boolean): void;
  /** The first call shed after a quiet spell of {@link SHEDDING_QUIET_MS}. */
  sheddingStarted?(episode: SheddingEpisode): void;
  /** No call shed for {@link SHEDDING_QUIET_MS}, checked at each window's end. */
  sheddingStopped?(episode: SheddingEpisode): void;
}

/**
 * Overload protection without Nest: per process, no store. Calls are admitted by pool and
 * priority against adaptive concurrency limits (see {@link AdmissionPool} and
 * `Gradient2Limit`); the caller ends each window with {@link OverloadProtection.update}
 * (every `windowMs`, with the event loop's delay), and each admitted call with its ticket.
 */
export class OverloadProtection {
  private readonly pools = new Map<string, AdmissionPool>();
  private shedding = false;
  private firstShedAt = 0;
  private lastShedAt = 0;
  private episodePools: string[] = [];
  private counts: ShedCounts = zeroCounts();

  constructor(
    readonly settings: OverloadSettings,
    private readonly listener: OverloadListener = {},
    private readonly clock: OverloadClock = SYSTEM_CLOCK,
  ) {
    const told = {
      shed: (pool: string, priority: Priority, signal: ShedSignal) =>
        this.onShed(pool, priority, signal),
      waited: (pool: string, priority: Priority, waitedMs: number, admitted: boolean) =>
        listener.waited?.(pool, priority, waitedMs, admitted),
    };
    // One event loop: its turn is timed once for every pool.
    const timed = [settings.pool, ...settings.pools.values()].some((p) => p.maxTurnMs !== Infinity);
    const turn = timed ? new LoopTurn(clock) : undefined;
    this.pools.set(PROCESS_POOL, new AdmissionPool(PROCESS_POOL, settings.pool, clock, told, turn));
    for (const [name, pool] of settings.pools) {
      this.pools.set(name, new AdmissionPool(name, pool, clock, told, turn));
    }
  }

  /** The pool named `name` (the process's when undefined); undefined for an unknown name. */
  pool(name: string = PROCESS_POOL): AdmissionPool | undefined {
    return this.pools.get(name);
  }

  /** Every pool, the process's first. */
  allPools(): AdmissionPool[] {
    return [...this.pools.values()];
  }

  /** Sheds every call waiting in a queue (at shutdown). */
  close(): void {
    for (const pool of this.pools.values()) pool.close();
  }

  /** Whether a shedding episode is on. */
  get isShedding(): boolean {
    return this.shedding;
  }

  /**
   * Admits a call of `priority` in `pool`: its ticket, or undefined when shed; a promise
   * only while it waits in the queue.
   */
  acquire(
    priority: Priority,
    pool = PROCESS_POOL,
  ): Ticket | undefined | Promise<Ticket | undefined> {
    return (this.pools.get(pool) ?? this.pools.get(PROCESS_POOL)!).acquire(priority);
  }

  /**
   * Ends a window in every pool, with the event loop's delay over it in **ms** (undefined
   * when it is not watched) and its utilisation over it, from 0 to 1
   * (`performance.eventLoopUtilization`; undefined when not measured), and a shedding
   * episode that has been quiet long enough.
   */
  update(eventLoopDelayMs?: number, utilization?: number): void {
    for (const pool of this.pools.values()) pool.update(eventLoopDelayMs, utilization);
    if (this.shedding && this.clock.now() - this.lastShedAt >= SHEDDING_QUIET_MS) {
      this.shedding = false;
      this.listener.sheddingStopped?.({
        ...this.processState(),
        pools: this.episodePools,
        shed: this.counts,
        // Whole ms, as the log line's other durations: the clock reads fractions.
        durationMs: Math.round(this.lastShedAt - this.firstShedAt),
      });
    }
  }

  private onShed(pool: string, priority: Priority, signal: ShedSignal): void {
    const now = this.clock.now();
    this.lastShedAt = now;
    if (!this.shedding) {
      this.shedding = true;
      this.firstShedAt = now;
      this.counts = zeroCounts();
      this.episodePools = [pool];
      this.counts[priority]++;
      this.listener.sheddingStarted?.({
        ...this.processState(),
        pools: [pool],
        shed: { ...this.counts },
        signal,
      });
    } else {
      this.counts[priority]++;
      if (!this.episodePools.includes(pool)) this.episodePools.push(pool);
    }
    this.listener.shed?.(pool, priority, signal);
  }

  private processState(): { limit: number; inFlight: number } {
    const pool = this.pools.get(PROCESS_POOL)!;
    return { limit: pool.limiter.limit, inFlight: pool.inFlightTotal };
  }
}

function zeroCounts(): ShedCounts {
  return Object.fromEntries(PRIORITIES.map((p) => [p, 0])) as ShedCounts;
}
