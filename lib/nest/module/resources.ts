import { Logger } from '@nestjs/common';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { RateLimiter } from '../../core/limiter.js';
import { AllowList } from '../../http/allow-list.js';
import { ALGORITHMS } from '../../core/policy.js';
import { quote, RateLimitConfigError } from '../../core/errors.js';
import { MemoryStore } from '../../core/stores/memory-store.js';
import { RedisStore } from '../../core/stores/redis-store.js';
import type { RateLimitStore } from '../../core/stores/store.js';
import {
  createMetrics,
  validateMetricsOption,
  type PromClientLoader,
  type RateLimitMetrics,
} from '../observability/metrics.js';
import type { RateLimitModuleOptions } from './options.js';
import { declareDefaults } from '../declare/defaults.js';
import {
  createTracing,
  type DecisionTracing,
  type OtelApiLoader,
} from '../observability/tracing.js';

const WHERE = 'RateLimitModule options';

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
 * Checks the module options that no other part checks, at bootstrap.
 * @throws {RateLimitConfigError} naming the option and its value
 */
export function validateOptions(options: RateLimitModuleOptions): void {
  const fail = (name: string, expected: string) => {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid ${name} ${quote((options as Record<string, unknown>)[name])}: expected ${expected}`,
      WHERE,
    );
  };
  if (options === null || typeof options !== 'object') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid options ${quote(options)}`,
      WHERE,
    );
  }
  const { algorithm, mode, trustedProxies, ipv6Subnet, headers, store, redis } = options;
  if (algorithm !== undefined && !ALGORITHMS.includes(algorithm)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_ALGORITHM',
      `unknown algorithm ${quote(algorithm)}: use one of ${ALGORITHMS.join(', ')}`,
      WHERE,
    );
  }
  const { enabled } = options;
  if (enabled !== undefined && typeof enabled !== 'boolean' && typeof enabled !== 'function')
    fail('enabled', 'a boolean or a function returning one');
  if (mode !== undefined && mode !== 'enforce' && mode !== 'shadow')
    fail('mode', "'enforce' or 'shadow'");
  const { errorFormat } = options;
  if (errorFormat !== undefined && errorFormat !== 'nest' && errorFormat !== 'problem')
    fail('errorFormat', "'nest' or 'problem'");
  if (
    trustedProxies !== undefined &&
    !(Number.isSafeInteger(trustedProxies) && trustedProxies >= 0)
  ) {
    fail('trustedProxies', 'an integer >= 0');
  }
  if (
    ipv6Subnet !== undefined &&
    !(Number.isSafeInteger(ipv6Subnet) && ipv6Subnet >= 1 && ipv6Subnet <= 128)
  ) {
    fail('ipv6Subnet', 'an integer from 1 to 128');
  }
  // A timer's delay: setTimeout takes at most 2^31-1 ms.
  const delay = (name: 'connectTimeoutMs' | 'announceIntervalMs', min: number) => {
    const value = options[name];
    if (
      value !== undefined &&
      !(Number.isSafeInteger(value) && value >= min && value <= 2 ** 31 - 1)
    )
      fail(name, `an integer number of ms from ${min} to 2^31-1`);
  };
  delay('connectTimeoutMs', 0);
  delay('announceIntervalMs', 10);
  const { controlRefreshMs } = options;
  if (
    controlRefreshMs !== undefined &&
    controlRefreshMs !== false &&
    !(
      Number.isSafeInteger(controlRefreshMs) &&
      controlRefreshMs >= 0 &&
      controlRefreshMs <= 2 ** 31 - 1
    )
  ) {
    fail('controlRefreshMs', 'an integer number of ms from 0 to 2^31-1, or false');
  }
  if (
    headers !== undefined &&
    typeof headers !== 'boolean' &&
    (typeof headers !== 'object' ||
      headers === null ||
      (headers.legacy !== undefined && typeof headers.legacy !== 'boolean') ||
      (headers.standard !== undefined &&
        headers.standard !== 'draft-10' &&
        headers.standard !== false))
  ) {
    fail('headers', "a boolean or { legacy?: boolean, standard?: 'draft-10' | false }");
  }
  const { onStoreFailure, instances } = options;
  if (
    onStoreFailure !== undefined &&
    onStoreFailure !== 'open' &&
    onStoreFailure !== 'closed' &&
    onStoreFailure !== 'local'
  ) {
    fail('onStoreFailure', "'open', 'closed' or 'local'");
  }
  if (instances !== undefined && (!Number.isSafeInteger(instances) || instances < 1)) {
    fail('instances', 'an integer >= 1');
  }
  for (const name of ['failClosed', 'global', 'tracing'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'boolean') fail(name, 'a boolean');
  }
  if (
    options.errorMessage !== undefined &&
    typeof options.errorMessage !== 'string' &&
    typeof options.errorMessage !== 'function'
  ) {
    fail('errorMessage', 'a string or a function of the decision');
  }
  for (const name of ['key', 'skip', 'onDecision'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function')
      fail(name, 'a function');
  }
  if (
    store !== undefined &&
    store !== 'memory' &&
    typeof (store as RateLimitStore)?.consume !== 'function'
  ) {
    fail('store', "'memory' or an object implementing RateLimitStore");
  }
  if (store !== undefined && redis !== undefined) fail('store', 'either store or redis, not both');
  if (
    redis !== undefined &&
    typeof redis !== 'string' &&
    (typeof redis !== 'object' || redis === null)
  ) {
    fail('redis', 'a URL, ioredis options, or a Redis or Cluster client');
  }
  validateMetricsOption(options.metrics);
  if (options.allowList !== undefined) new AllowList(options.allowList, options, WHERE);
  // The limiter's own options and the default policy, before any connection is opened:
  // a start that fails must leave nothing behind.
  try {
    new RateLimiter({
      store: new MemoryStore({ sweepIntervalMs: 0 }),
      prefix: options.prefix,
      timeoutMs: options.timeoutMs,
      circuitBreaker: options.circuitBreaker,
      denyCache: options.denyCache,
    });
  } catch (error) {
    // Name the place the user wrote it, not the class that checked it.
    if (error instanceof RateLimitConfigError)
      throw new RateLimitConfigError(error.code, error.detail, WHERE);
    throw error;
  }
  declareDefaults(options);
}

/**
 * Builds the store. A client the module creates is tuned for a limiter: no offline queue
 * and no re-sent commands (a request is never counted twice, and a dead Redis fails
 * fast), auto-pipelining on; bootstrap waits up to `connectTimeoutMs` for it to connect,
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
        'no redis configured: using the in-memory store, so each process counts on its own',
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
  const redisStore = new RedisStore({ client, controlRefreshMs: options.controlRefreshMs });
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

function isClient(redis: unknown): redis is Redis | Cluster {
  return typeof (redis as Redis).evalsha === 'function';
}

async function connect(
  redis: string | RedisOptions,
  waitMs: number,
  logger: Logger,
): Promise<Redis> {
  const { Redis } = await import('ioredis');
  const tuned: RedisOptions = {
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    enableAutoPipelining: true,
    lazyConnect: true,
  };
  const client =
    typeof redis === 'string' ? new Redis(redis, tuned) : new Redis({ ...redis, ...tuned });
  let down = false;
  client.on('error', (error: Error) => {
    // ioredis reconnects by itself; say so once per outage, not once per attempt. Requests
    // report their own failures as rate_limit.backend_error.
    if (!down)
      logger.warn(`rate_limit.redis_unreachable ${JSON.stringify({ message: error.message })}`);
    down = true;
  });
  client.on('ready', () => {
    if (down) logger.log('Redis is reachable again');
    down = false;
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waited = await Promise.race([
    client.connect().then(
      () => true,
      () => false,
    ),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), waitMs))),
  ]);
  clearTimeout(timer);
  if (!waited)
    logger.warn(
      `Redis not reachable within ${waitMs} ms: starting anyway; limits apply once it is`,
    );
  return client;
}
