import { quote, RateLimitConfigError } from '../../core/errors.js';
import { definePolicy } from '../../core/limiter.js';
import { checkCost } from '../../core/model/policy.js';
import type { RateInput } from '../../core/model/rate.js';
import {
  ROUTE_SCOPE,
  type DeclaredPolicy,
  type RateFn,
  type RateLimitOptions,
} from './policy-options.js';

/** Validates what can be validated without a request. */
export function declare(
  rate: RateInput | RateFn,
  options: RateLimitOptions,
  where: string,
): DeclaredPolicy {
  if (options === null || typeof options !== 'object') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_POLICY_OPTION',
      `invalid @RateLimit options ${quote(options)}`,
      where,
    );
  }
  const { name = 'default', scope, algorithm, burst, cost, block, extendBlock } = options;
  if (typeof cost === 'number') checkCost(cost, undefined, name, where);
  else if (cost !== undefined && typeof cost !== 'function')
    checkCost(cost, undefined, name, where);
  const mode = options.onStoreFailure;
  if (mode !== undefined && mode !== 'open' && mode !== 'closed' && mode !== 'local') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_POLICY_OPTION',
      `invalid onStoreFailure ${quote(mode)}: expected 'open', 'closed' or 'local'`,
    );
  }
  for (const flag of ['failClosed', 'shadow', 'headers', 'exposeDetails'] as const) {
    if (options[flag] !== undefined && typeof options[flag] !== 'boolean') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_POLICY_OPTION',
        `invalid ${flag} ${quote(options[flag])}: expected true or false`,
        where,
      );
    }
  }
  if (options.count !== undefined && options.count !== 'failed' && options.count !== 'succeeded') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_POLICY_OPTION',
      `invalid count ${quote(options.count)}: expected 'failed' or 'succeeded'`,
      where,
    );
  }
  checkAddressBurst(options.addressBurst, where);
  for (const fn of ['key', 'failed'] as const) {
    if (options[fn] !== undefined && typeof options[fn] !== 'function') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_POLICY_OPTION',
        `invalid ${fn} ${quote(options[fn])}: expected a function`,
        where,
      );
    }
  }
  const shape = {
    name,
    // `'route'` is the route's own scope, which the route table fills in.
    scope: scope === ROUTE_SCOPE ? undefined : scope,
    algorithm,
    burst,
    cost: typeof cost === 'number' ? cost : undefined,
    block,
    extendBlock,
  };
  if (typeof rate === 'function') {
    // The rate comes per request; check the rest on a stand-in rate now, so a bad name,
    // scope, algorithm or burst still fails at definition.
    definePolicy({ ...shape, cost: undefined, rate: { limit: 1, periodMs: 1 } }, where);
    return { name, rateFn: rate, options, where };
  }
  return { name, policy: definePolicy({ ...shape, rate }, where), options, where };
}

/**
 * Checks an `addressBurst` (see {@link RateLimitOptions.addressBurst}): undefined, or an
 * integer >= 1.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_POLICY_OPTION`, quoting the value
 */
export function checkAddressBurst(burst: unknown, where: string): void {
  if (burst === undefined || (Number.isSafeInteger(burst) && (burst as number) >= 1)) return;
  throw new RateLimitConfigError(
    'ERR_RATE_LIMIT_POLICY_OPTION',
    `invalid addressBurst ${quote(burst)}: expected an integer >= 1`,
    where,
  );
}
