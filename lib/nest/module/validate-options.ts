import { ALGORITHMS } from '../../core/policy.js';
import { quote, RateLimitConfigError } from '../../core/errors.js';
import { AllowList } from '../../http/allow-list.js';
import { STANDARD_DRAFTS } from '../../http/headers.js';
import { RateLimiter } from '../../core/limiter.js';
import { MemoryStore } from '../../core/stores/memory-store.js';
import { declareDefaults } from '../declare/defaults.js';
import { checkAddressBurst } from '../declare/declare-policy.js';
import { validateMetricsOption } from '../observability/metrics.js';
import type { RateLimitStore } from '../../core/stores/store.js';
import type { RateLimitModuleOptions } from './options.js';
import { validateCostOptions } from '../graphql/options.js';
import { overloadSettings } from '../../core/overload/options.js';

const WHERE = 'RateLimitModule options';

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
        headers.standard !== false &&
        !STANDARD_DRAFTS.includes(headers.standard)))
  ) {
    fail(
      'headers',
      `a boolean or { legacy?: boolean, standard?: ${STANDARD_DRAFTS.map((d) => `'${d}'`).join(' | ')} | false }`,
    );
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
  checkAddressBurst(options.addressBurst, 'RateLimitModule');
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
  if (options.graphql !== undefined) validateCostOptions(options.graphql);
  overloadSettings(options.overload);
  if (options.allowList !== undefined) new AllowList(options.allowList, options, WHERE);
  // The limiter's own options and the default policy, before any connection is opened:
  // a start that fails must leave nothing behind.
  try {
    new RateLimiter({
      store: new MemoryStore({ sweepIntervalMs: 0 }),
      prefix: options.prefix,
      timeoutMs: options.timeoutMs,
      maxWaitMs: options.maxWaitMs,
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
