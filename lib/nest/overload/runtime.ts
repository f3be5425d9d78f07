import type { ExecutionContext } from '@nestjs/common';
import { SYSTEM_CLOCK, type OverloadClock } from '../../core/overload/clock.js';
import { overloadSettings, type OverloadSettings } from '../../core/overload/options.js';
import { OverloadProtection, type SheddingEpisode } from '../../core/overload/protection.js';
import { isPriority, type Priority } from '../../core/overload/types.js';
import type { RateLimitModuleOptions } from '../module/options.js';
import type { RateLimitEvents } from '../observability/events.js';
import { callDecisionHook, type DecisionEvent } from '../observability/observer.js';
import type { OverloadMetrics } from '../observability/overload-metrics.js';
import type { DecisionTracing } from '../observability/tracing.js';
import type { RequestOutcome } from '../pipeline/outcome.js';
import { refusalOf } from '../transports/refusal.js';
import { EventLoopDelay, LoopUtilization } from './event-loop.js';
import { OverloadRoutes, type OverloadRoute } from './routes.js';

/** The message of a shed call's 503. */
const SHED_MESSAGE = 'The server is overloaded; retry shortly';

/**
 * A module's overload protection (the `overload` option): the pools and their limits, the
 * routes' priorities, the event loop watched once per window, and what a shed call is
 * answered and reported with. Made by {@link createOverload}; started with the module and
 * stopped at shutdown.
 */
export class Overload {
  readonly protection: OverloadProtection;
  readonly routes: OverloadRoutes;
  metrics: OverloadMetrics | undefined;
  private readonly loop = new EventLoopDelay();
  private readonly utilization = new LoopUtilization();
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly format: 'nest' | 'problem';

  constructor(
    readonly settings: OverloadSettings,
    private readonly options: RateLimitModuleOptions,
    private readonly events: RateLimitEvents,
    private readonly tracing: DecisionTracing | undefined,
    private readonly clock: OverloadClock = SYSTEM_CLOCK,
  ) {
    this.format = options.errorFormat === 'problem' ? 'problem' : 'nest';
    this.routes = new OverloadRoutes(settings);
    this.protection = new OverloadProtection(
      settings,
      {
        shed: (pool, priority) => this.metrics?.shed(pool, priority),
        waited: (pool, _priority, waitedMs, admitted) =>
          this.metrics?.waited(pool, waitedMs, admitted),
        sheddingStarted: (episode) => events.shedding(true, this.logged(episode)),
        sheddingStopped: (episode) => events.shedding(false, this.logged(episode)),
      },
      clock,
    );
  }

  /** Starts the windows and the event loop's watch (at module init). */
  start(): void {
    if (this.timer !== undefined) return;
    const windowMs = this.settings.pool.windowMs;
    const watch = this.settings.watchesEventLoop;
    if (watch) this.loop.start(this.clock.now());
    this.utilization.start();
    this.timer = setInterval(() => {
      let delay: number | undefined;
      if (watch) {
        delay = this.loop.read(this.clock.now(), windowMs);
        if (this.metrics) this.metrics.eventLoopDelayMs = delay;
      }
      this.protection.update(delay, this.utilization.read());
    }, windowMs);
    // Never what keeps a process alive.
    this.timer.unref();
  }

  /** Stops the windows and the event loop's watch (at shutdown). */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.loop.stop();
    this.protection.close();
    this.metrics?.remove();
  }

  /**
   * The priority of a call of `route`: its own, or what its function answers; a function
   * that throws or answers no priority gives the fallback, logged.
   */
  priorityOf(route: OverloadRoute, ctx: ExecutionContext): Priority {
    const { priority } = route;
    if (typeof priority !== 'function') return priority;
    let answer: unknown;
    try {
      answer = priority(ctx);
    } catch (error) {
      this.events.configError(`${route.name} @Priority`, error);
      return route.fallback;
    }
    if (isPriority(answer)) return answer;
    this.events.configError(
      `${route.name} @Priority`,
      new Error(`@Priority function answered ${String(answer)}, no priority`),
    );
    return route.fallback;
  }

  /**
   * The outcome of a shed call: 503 with `Retry-After` (problem type
   * `temporary-reduced-capacity` under `errorFormat: 'problem'`), reported to `onDecision`
   * and the active span. A new one each time: a `refuse` of your own may add to its headers.
   */
  shed(route: OverloadRoute, priority: Priority): RequestOutcome {
    const retryAfter = this.settings.retryAfterSeconds;
    this.observe(route, priority);
    return {
      allowed: false,
      headers: { 'Retry-After': String(retryAfter) },
      refusal: refusalOf({
        status: 503,
        retryAfter,
        message: SHED_MESSAGE,
        exposeDetails: true,
        policies: [],
        format: this.format,
      }),
    };
  }

  private observe(route: OverloadRoute, priority: Priority): void {
    const span = this.tracing?.activeSpan();
    if (span) {
      try {
        span.setAttributes({
          'ratelimit.outcome': 'shed',
          'ratelimit.priority': priority,
          'ratelimit.overload.pool': route.pool,
          'ratelimit.overload.limit': this.protection.pool(route.pool)?.limiter.limit ?? 0,
        });
      } catch {
        // A span that refuses attributes must not fail the request.
      }
    }
    const hook = this.options.onDecision;
    if (hook === undefined) return;
    const event: DecisionEvent = {
      route: route.name,
      identity: '',
      allowed: false,
      shadow: false,
      policies: [],
      cost: 0,
      durationMs: 0,
      outcome: 'shed',
      priority,
    };
    callDecisionHook(hook, event, (error) => this.events.configError('onDecision', error));
  }

  private logged(episode: SheddingEpisode): Record<string, unknown> {
    return { ...episode };
  }
}

/**
 * The module's overload protection, or undefined when the `overload` option is off.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OVERLOAD_OPTION` for a bad option
 */
export function createOverload(
  options: RateLimitModuleOptions,
  events: RateLimitEvents,
  tracing: DecisionTracing | undefined,
): Overload | undefined {
  const settings = overloadSettings(options.overload);
  return settings && new Overload(settings, options, events, tracing);
}
