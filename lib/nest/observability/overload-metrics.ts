import { RateLimitConfigError } from '../../core/errors.js';
import type { OverloadProtection } from '../../core/overload/protection.js';
import { PRIORITIES, type Priority } from '../../core/overload/types.js';
import {
  checkUnregistered,
  type MetricsOptions,
  type MetricsRegistry,
  type PromClient,
  type PromClientLoader,
} from './metrics.js';

const WHERE = 'RateLimitModule options';

/** Queue waits, in **seconds**: 1 ms to 10 s. */
const QUEUE_WAIT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

type Labelled = { set(labels: Record<string, string>, value: number): void };

/**
 * The Prometheus metrics of overload protection, beside the module's (same registry and
 * prefix): `overload_limit` (per pool), `overload_in_flight` (per pool and priority),
 * `overload_shed_total` (per pool and priority, every series at 0 from the start),
 * `overload_queue_wait_seconds` (per pool and outcome), `overload_event_loop_delay_seconds`
 * and `overload_shedding` (1 during an episode). Gauges are read when scraped. Labels are
 * pool names (from the options) and priorities only.
 */
export class OverloadMetrics {
  private readonly shedCount: { inc(labels: Record<string, string>, value?: number): void };
  private readonly queueWait: {
    observe(labels: Record<string, string>, value: number): void;
  };
  private readonly registered: { name: string; metric: unknown }[] = [];
  /** The last window's event-loop delay, in **ms**. */
  eventLoopDelayMs = 0;

  /** @throws {RateLimitConfigError} when a metric of the same name is already registered */
  constructor(
    prom: PromClient,
    private readonly registry: MetricsRegistry,
    protection: OverloadProtection,
    prefix = 'rate_limit_',
  ) {
    const names = {
      limit: `${prefix}overload_limit`,
      inFlight: `${prefix}overload_in_flight`,
      shed: `${prefix}overload_shed_total`,
      queueWait: `${prefix}overload_queue_wait_seconds`,
      delay: `${prefix}overload_event_loop_delay_seconds`,
      shedding: `${prefix}overload_shedding`,
    };
    checkUnregistered(registry, Object.values(names));
    const registers = [registry];
    const track = <T>(name: string, metric: T): T => {
      this.registered.push({ name, metric });
      return metric;
    };
    const pools = protection.allPools();
    track(
      names.limit,
      new prom.Gauge({
        name: names.limit,
        help: 'The adaptive concurrency limit of overload protection, per pool: calls admitted in flight below critical.',
        labelNames: ['pool'],
        registers,
        collect(this: Labelled) {
          for (const p of pools) this.set({ pool: p.name }, p.limiter.limit);
        },
      }),
    );
    track(
      names.inFlight,
      new prom.Gauge({
        name: names.inFlight,
        help: 'Calls in flight under overload protection, per pool and priority.',
        labelNames: ['pool', 'priority'],
        registers,
        collect(this: Labelled) {
          for (const p of pools) {
            PRIORITIES.forEach((priority, i) =>
              this.set({ pool: p.name, priority }, p.inFlight[3 - i]!),
            );
          }
        },
      }),
    );
    this.shedCount = track(
      names.shed,
      new prom.Counter({
        name: names.shed,
        help: 'Calls shed by overload protection (answered 503), per pool and priority.',
        labelNames: ['pool', 'priority'],
        registers,
      }),
    );
    for (const p of pools) {
      for (const priority of PRIORITIES) this.shedCount.inc({ pool: p.name, priority }, 0);
    }
    this.queueWait = track(
      names.queueWait,
      new prom.Histogram({
        name: names.queueWait,
        help: 'How long calls waited for a slot in the overload queue, in seconds, per pool and outcome (admitted or shed).',
        labelNames: ['pool', 'outcome'],
        buckets: QUEUE_WAIT_BUCKETS,
        registers,
      }) as unknown as { observe(labels: Record<string, string>, value: number): void },
    );
    const delay = () => this.eventLoopDelayMs / 1000;
    track(
      names.delay,
      new prom.Gauge({
        name: names.delay,
        help: "The event loop's delay over the last window, in seconds, as overload protection reads it.",
        registers,
        collect(this: { set(value: number): void }) {
          this.set(delay());
        },
      }),
    );
    track(
      names.shedding,
      new prom.Gauge({
        name: names.shedding,
        help: '1 while overload protection is shedding (a call shed in the last 2 s), else 0.',
        registers,
        collect(this: { set(value: number): void }) {
          this.set(protection.isShedding ? 1 : 0);
        },
      }),
    );
  }

  /** Counts a shed call. */
  shed(pool: string, priority: Priority): void {
    this.shedCount.inc({ pool, priority });
  }

  /** Records a queue wait, in **ms**. */
  waited(pool: string, waitedMs: number, admitted: boolean): void {
    this.queueWait.observe({ pool, outcome: admitted ? 'admitted' : 'shed' }, waitedMs / 1000);
  }

  /** Unregisters these metrics (at shutdown). */
  remove(): void {
    for (const { name, metric } of this.registered.splice(0)) {
      if (this.registry.getSingleMetric(name) === metric) this.registry.removeSingleMetric(name);
    }
  }
}

/**
 * Loads prom-client (already loaded by the module's metrics) and registers the overload
 * metrics, when the `metrics` option asks for metrics.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_PEER_DEPENDENCY` when prom-client cannot be loaded
 */
export async function createOverloadMetrics(
  metrics: boolean | MetricsOptions | undefined,
  protection: OverloadProtection,
  load: PromClientLoader = () => import(/* webpackIgnore: true */ 'prom-client'),
): Promise<OverloadMetrics | undefined> {
  if (metrics === undefined || metrics === false) return undefined;
  let prom: PromClient;
  try {
    const loaded = (await load()) as PromClient & { default?: PromClient };
    prom = typeof loaded.Counter === 'function' ? loaded : loaded.default!;
  } catch (error) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_PEER_DEPENDENCY',
      `metrics needs the optional peer dependency prom-client: install it (npm install prom-client) or remove the metrics option (${error instanceof Error ? error.message : String(error)})`,
      WHERE,
    );
  }
  const options = metrics === true ? {} : metrics;
  return new OverloadMetrics(prom, options.registry ?? prom.register, protection, options.prefix);
}
