import type { ExecutionContext } from '@nestjs/common';
import { quote, RateLimitConfigError } from '../../core/errors.js';
import { parseRate, type Rate, type RateInput } from '../../core/model/rate.js';
import { keys, needsUser } from './keys.js';
import type { RateFn } from './policy-options.js';

/** The strictest tier of each `byTier` rate function: its rate when the plan function fails. */
const strictestTiers = new WeakMap<RateFn, Rate>();

/**
 * A rate per plan:
 * `byTier({ free: '100/h', pro: '5000/h' }, (ctx) => rateLimitContext(ctx).user?.plan, { fallback: 'free' })`
 * (the helper finds the user wherever the transport keeps it, on Fastify's raw request too).
 * Unknown or missing plans get the fallback; a plan function that throws or rejects gets the
 * strictest tier (see {@link strictestTier}), so that no input takes the limit off.
 *
 * On an HTTP route that a guard authenticates (its own, or a global one registered after the
 * module), the policy is decided after that guard, so the plan function sees the user it
 * set; mark a plan function that reads no user with `keys.withoutUser` to decide it before.
 *
 * @param planOf the plan of the request (may be async)
 * @throws {RateLimitConfigError} at definition, for a bad rate or a fallback that is no tier
 */
export function byTier(
  tiers: Record<string, RateInput>,
  planOf: (ctx: ExecutionContext) => string | undefined | Promise<string | undefined>,
  options: { fallback: string },
): RateFn {
  const where = 'byTier';
  const rates = new Map(
    Object.entries(tiers).map(([plan, rate]) => [plan, parseRate(rate, `${where} tier "${plan}"`)]),
  );
  const fallback = rates.get(options?.fallback);
  if (!fallback) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_POLICY_OPTION',
      `fallback ${quote(options?.fallback)} is not one of the tiers ${quote([...rates.keys()])}`,
      where,
    );
  }
  const rate: RateFn = async (ctx) => rates.get((await planOf(ctx)) ?? '') ?? fallback;
  strictestTiers.set(rate, strictest([...rates.values()]));
  return needsUser(planOf) ? rate : keys.withoutUser(rate);
}

/**
 * The rate a `byTier` function stands for when its plan function fails: its strictest tier,
 * the one that admits the fewest requests over time (the lowest `limit / periodMs`; of equal
 * rates, the smaller burst). Undefined for any other function.
 */
export function strictestTier(fn: RateFn): Rate | undefined {
  return strictestTiers.get(fn);
}

/**
 * Of two rates, the one that admits fewer requests over time (of equal rates, the smaller
 * `limit`): `a` when they are alike.
 */
export function stricterRate(a: Rate, b: Rate): Rate {
  // Cross-multiplied: limits and periods are integers well under 2^50, so no precision is lost
  // that a division would.
  const left = BigInt(a.limit) * BigInt(b.periodMs);
  const right = BigInt(b.limit) * BigInt(a.periodMs);
  if (left !== right) return left < right ? a : b;
  return b.limit < a.limit ? b : a;
}

function strictest(rates: readonly Rate[]): Rate {
  return rates.reduce((a, b) => stricterRate(a, b));
}
