/**
 * The priorities of overload protection, highest first. At the concurrency limit the lowest
 * priority present is shed first: `sheddable` at once (it never waits in the queue), then
 * `normal`, then `high`; `critical` only at the hard cap (`criticalCap` × the limit).
 */
export const PRIORITIES = ['critical', 'high', 'normal', 'sheddable'] as const;

/** One of {@link PRIORITIES}. */
export type Priority = (typeof PRIORITIES)[number];

/** A priority's rank: 3 for `critical` down to 0 for `sheddable`. */
export function rankOf(priority: Priority): 0 | 1 | 2 | 3 {
  return priority === 'critical' ? 3 : priority === 'high' ? 2 : priority === 'normal' ? 1 : 0;
}

/** Whether `value` is one of {@link PRIORITIES}. */
export function isPriority(value: unknown): value is Priority {
  return (PRIORITIES as readonly unknown[]).includes(value);
}

/**
 * The adaptive concurrency limit's settings: Gradient2 (Netflix concurrency-limits) over
 * fixed sample windows, with a floor, a ceiling, and a back-off on event-loop delay. Counts
 * are in requests in flight; durations in **ms**.
 */
export interface AdaptiveLimitOptions {
  /**
   * The limit before any window has been measured. An integer from `minLimit` to
   * `maxLimit`. Default 20, raised to `minLimit`.
   */
  initialLimit?: number;
  /**
   * The floor: the limit never goes below it, and an idle process is at it (the limit is
   * capped at twice the most calls in flight of the last 10 windows, the app-limited cap,
   * and never below this): the burst admitted from cold. An integer >= 1. Default 50 (or
   * `maxLimit` or `initialLimit` when either is set lower): a web server's burst from idle.
   * A process whose calls queue on a small resource (a database pool of 4 connections)
   * sets it near that resource's size, so that the limit can come down to what it serves.
   */
  minLimit?: number;
  /** The ceiling: the limit never goes above it. An integer >= `minLimit`. Default 1000. */
  maxLimit?: number;
  /**
   * How long one sample window lasts, in **ms**: the limit is updated once per window from
   * the latencies ended in it, and the event loop's delay is read once per window. An
   * integer from 10 to 60,000. Default 100.
   */
  windowMs?: number;
  /**
   * Gradient2's smoothing: the weight of the new estimate against the current limit, per
   * window. A number in (0, 1]. Default 0.2 (Netflix's default).
   */
  smoothing?: number;
  /**
   * Gradient2's tolerance: how far the short-window latency may rise above the long-window
   * latency before the limit comes down (1.5: 50 % above). A number >= 1. Default 1.5
   * (Netflix's default).
   */
  rttTolerance?: number;
  /**
   * Gradient2's long window, in **sample windows**: the long-window latency is an
   * exponential moving average over about this many windows. An integer >= 2. Default 600
   * (one minute of 100 ms windows).
   */
  longWindow?: number;
  /**
   * The headroom added to the limit at each update (Gradient2's queue size), in requests:
   * a number >= 0, or a function of the current limit. Default `Math.sqrt(limit)`.
   */
  headroom?: number | ((limit: number) => number);
  /**
   * The event loop's delay, in **ms** (its mean over a window, beyond the sampling
   * resolution), above which the process counts as overloaded whatever the latencies say:
   * the limit is multiplied by `eventLoopBackoff` each such window, and, while the loop is
   * busy (utilisation above 0.9 in each of the last 2 windows), `sheddable` calls are shed; above twice this delay `normal` calls too, above four times `high` calls too.
   * `false`: the event loop is not watched (nor its turns timed, unless `maxTurnMs` is set).
   * Default 50.
   */
  maxEventLoopDelayMs?: number | false;
  /** The limit's factor per window while the event loop is late. A number in (0, 1). Default 0.9. */
  eventLoopBackoff?: number;
}

/**
 * How calls are admitted against a limit: the hard cap of `critical` calls, the bounded
 * queue of the priorities above `sheddable`, and the budget of the event loop's turn.
 */
export interface AdmissionOptions {
  /**
   * The event loop's turn budget, in **ms**: a call seen when the loop's current turn has
   * been busy for longer (it waited that long behind the calls run before it in the turn) is
   * shed if `sheddable`; above twice this, `normal` calls too; above four times, `high`
   * calls too; `critical` never. It bounds the queue a CPU-bound handler builds in the
   * sockets, which the concurrency limit cannot see. It applies only while the loop is busy
   * over a longer horizon: its utilisation (`performance.eventLoopUtilization`) above 0.9 in
   * each of the last 2 windows; so the burst of an idle process is never shed by it.
   * `false`: turns are not timed.
   * A number > 0, or false. Default 5; false when `maxEventLoopDelayMs` is false.
   */
  maxTurnMs?: number | false;
  /**
   * `critical` calls are admitted while the calls in flight are fewer than this multiple of
   * the limit (the hard cap). A number >= 1. Default 2.
   */
  criticalCap?: number;
  /**
   * How long a `high` or `normal` call may wait for a slot at the limit, in **ms**, before
   * it is shed; `high` calls get slots first. `sheddable` calls never wait. An integer from
   * 0 to 10,000; 0 (default) sheds at once.
   */
  queueMs?: number;
  /**
   * How many calls may wait at once; when the queue is full, a newcomer takes the place of
   * the lowest-priority call waiting if there is one of lower priority (that one is shed),
   * else it is shed. An integer >= 1. Default 100.
   */
  maxQueued?: number;
  /**
   * How long an admitted call may count in flight at most, in **ms**: one still counted
   * after this long is let go (a handler that never ends, a long stream, a call refused
   * after admission where the transport does not tell). An integer from 1,000 to 2^31-1.
   * Default 60,000.
   */
  leaseMs?: number;
}

/**
 * The settings of one named pool: its own limit and admission (its windows are the
 * process's `windowMs`).
 */
export type OverloadPoolOptions = Omit<AdaptiveLimitOptions, 'windowMs'> & AdmissionOptions;

/**
 * Overload protection (`RateLimitModule.forRoot({ overload })`): per process, no store
 * call. Calls are admitted against an adaptive
 * concurrency limit by priority; what is shed is answered 503 with `Retry-After`.
 */
export interface OverloadOptions extends AdaptiveLimitOptions, AdmissionOptions {
  /** The priority of calls whose route names none (`@Priority`). Default `'normal'`. */
  defaultPriority?: Priority;
  /**
   * The `Retry-After` of a shed call, in **seconds**: an integer from 1 to 3600. Default 1.
   */
  retryAfterSeconds?: number;
  /**
   * Named pools, each with a limit of its own (routes that share a database, say), chosen
   * per route with `@OverloadPool(name)`. A pool's settings default to the top-level ones;
   * routes naming no pool share the process's pool. The event loop's delay counts for all.
   */
  pools?: Readonly<Record<string, OverloadPoolOptions>>;
}
