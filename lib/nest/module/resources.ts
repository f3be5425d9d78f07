import { Logger } from '@nestjs/common';
import { connect, isClient } from './redis-connection.js';
import type { Cluster, Redis } from 'ioredis';
import { seeErrorsPage } from '../../core/errors-page.js';
import { MemoryStore } from '../../core/stores/memory/memory-store.js';
import { RedisStore } from '../../core/stores/redis/redis-store.js';
import type { RateLimitStore } from '../../core/stores/store.js';
import {
  createMetrics,
  type PromClientLoader,
  type RateLimitMetrics,
} from '../observability/metrics.js';
import type { RateLimitModuleOptions } from './options.js';
import { validateOptions } from './validate-options.js';
import {
  createTracing,
  type DecisionTracing,
  type OtelApiLoader,
} from '../observability/tracing.js';

/** The store and client the module runs on, and which of them it must close. */
export interface Resources {
  readonly store: RateLimitStore;
  readonly client: Redis | Cluster | undefined;
  readonly ownsClient: boolean;
  readonly ownsStore: boolean;
  /** The Prometheus metrics, when the `metrics` option asks for them. */
  readonly metrics?: RateLimitMetrics;
  /** The OpenTelemetry span annotation, unless `tracing` is false or the API is missing. */
  readonly tracing?: DecisionTracing;
}

/**
 * Builds the store. A client the module creates is tuned for a limiter: no offline queue
 * and no re-sent commands (a request is never counted twice, and a dead Redis fails
 * fast), each command written at once (no auto-pipelining); bootstrap waits up to `connectTimeoutMs` for it to connect,
 * so the first requests are counted, then goes on regardless (the guard fails open or
 * closed until Redis is reachable).
 */
export async function createResources(
  options: RateLimitModuleOptions,
  logger = new Logger('RateLimit'),
  loadPromClient?: PromClientLoader,
  loadOtelApi?: OtelApiLoader,
): Promise<Resources> {
  validateOptions(options);
  // Before any connection is opened, so a missing prom-client leaves nothing behind.
  const metrics = await createMetrics(options.metrics, loadPromClient);
  const tracing = await createTracing(options.tracing, loadOtelApi);
  const { redis, store } = options;
  if (store !== undefined && store !== 'memory')
    return { store, client: undefined, ownsClient: false, ownsStore: false, metrics, tracing };
  if (redis === undefined) {
    if (store === undefined) {
      logger.warn(
        `no redis configured: using the in-memory store, so each process counts on its own ${seeErrorsPage('No redis configured')}`,
      );
    }
    return {
      store: new MemoryStore(),
      client: undefined,
      ownsClient: false,
      ownsStore: true,
      metrics,
      tracing,
    };
  }
  const waitMs = options.connectTimeoutMs ?? 1000;
  const client = isClient(redis) ? redis : await connect(redis, waitMs, logger);
  // The store is the module's (its index timer stops on shutdown); the client only if made here.
  const redisStore = new RedisStore({
    client,
    controlRefreshMs: options.controlRefreshMs,
    connectTimeoutMs: waitMs,
  });
  await readControlIndex(redisStore, options.prefix ?? 'rl', waitMs);
  return {
    store: redisStore,
    client,
    ownsClient: !isClient(redis),
    ownsStore: true,
    metrics,
    tracing,
  };
}

/**
 * Reads the index of controlled identities before the first request, so that controls set
 * before this instance started apply to its first decisions without every request reading
 * its control hash. Waits at most `waitMs`; until a read succeeds, requests read it.
 */
async function readControlIndex(store: RedisStore, prefix: string, waitMs: number): Promise<void> {
  store.watchControls(prefix);
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    store.refreshControls(),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs))),
  ]);
  clearTimeout(timer);
}
