import { quote, RateLimitConfigError } from '../../core/errors.js';
import type { RateInput } from '../../core/model/rate.js';
import { declare, type DeclaredPolicy, type RateFn } from './decorators.js';
import type { DefaultPolicyOptions, RateLimitModuleOptions } from '../module/options.js';

/**
 * Validates the module `default`: one policy (a rate, a rate function, or options with a
 * `rate`) or a list of them, with distinct names.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_RATE` (and the others of `@RateLimit`) for a
 *   bad policy, `ERR_RATE_LIMIT_DUPLICATE_POLICY` for two of one name
 */
export function declareDefaults(options: RateLimitModuleOptions): DeclaredPolicy[] {
  const given = options.default;
  if (given === undefined) return [];
  const where = 'RateLimitModule default';
  if (!Array.isArray(given)) return [declareDefault(given, where)];
  if (given.length === 0) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_RATE',
      'invalid default []: give a policy, a list of policies, or leave it out',
      where,
    );
  }
  const declared = given.map((g, i) => declareDefault(g, `${where}[${i}]`));
  declared.forEach((d, i) => {
    if (declared.findIndex((e) => e.name === d.name) !== i) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_DUPLICATE_POLICY',
        `two default policies named "${d.name}": give each a distinct name`,
        d.where,
      );
    }
  });
  return declared;
}

function declareDefault(given: unknown, where: string): DeclaredPolicy {
  if (typeof given === 'object' && given !== null && 'rate' in given) {
    const { rate, ...rest } = given as DefaultPolicyOptions;
    return declare(rate, rest, where);
  }
  if (
    typeof given === 'string' ||
    typeof given === 'function' ||
    (typeof given === 'object' && given !== null)
  ) {
    return declare(given as RateInput | RateFn, {}, where);
  }
  throw new RateLimitConfigError('ERR_RATE_LIMIT_RATE', `invalid default ${quote(given)}`, where);
}
