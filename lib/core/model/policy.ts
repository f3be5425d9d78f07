import { concurrencyOf } from '../algorithms/concurrency.js';
import { MAX_LOG_ENTRIES } from '../algorithms/sliding-log.js';
import { quote, RateLimitConfigError } from '../errors.js';
import {
  isPositiveInteger,
  MAX_SCALED,
  parseDurationMs,
  parseRate,
  type RateInput,
} from './rate.js';
import type { Algorithm, PolicyAlgorithm } from '../algorithms/types.js';

// The algorithm names (Algorithm, PolicyAlgorithm) live in algorithms/types.ts, a leaf module
// the stores can import without this one; re-exported here.
export type { Algorithm, PolicyAlgorithm } from '../algorithms/types.js';

export const ALGORITHMS: readonly Algorithm[] = [
  'fixed-window',
  'sliding-window',
  'sliding-log',
  'token-bucket',
  'gcra',
];

/**
 * A policy as users write it: a rate (`{ rate: '100/m' }`), or a concurrency limit
 * (`{ concurrent: 5, leaseMs: 30_000 }`: requests in flight, see `concurrency.ts`).
 */
export interface PolicyInput {
  /** Distinguishes stacked policies (`burst`, `daily`); part of the Redis key. Default `'default'`. */
  name?: string;
  /** The quota, e.g. `'100/m'`. Required, unless the policy is a concurrency limit (`concurrent`). */
  rate?: RateInput;
  /**
   * A concurrency limit instead of a rate: at most this many requests of one identity in
   * flight (an integer >= 1). Not with `rate`, `algorithm`, `burst`, `cost` or `block`.
   */
  concurrent?: number;
  /**
   * With `concurrent`: how long, in **ms**, a slot stays taken when its request never gives it
   * back (its process died). Default 30,000. Longer than your slowest request.
   */
  leaseMs?: number;
  /** Default `'token-bucket'`. */
  algorithm?: Algorithm;
  /**
   * Bucket capacity for `token-bucket` and `gcra` (how many units may be spent at once);
   * defaults to the rate's limit. A positive integer; not allowed for the window algorithms.
   */
  burst?: number;
  /**
   * Budget shared by every call that names it; part of the Redis key. When absent, the
   * scope given to {@link RateLimiter.consume} applies, else `'global'`.
   */
  scope?: string;
  /** Units one request spends under this policy: an integer >= 0 (0 = peek). Default: the call's cost. */
  cost?: number;
  /**
   * A penalty: once a request is refused under this policy, the identity is refused under
   * it for this long (a block), e.g. `'15m'`, or a number of **ms**. Resets, exemptions and
   * overrides lift it. Default: none.
   */
  block?: string | number;
  /**
   * With `block`: a request refused during the block starts it again (a client that keeps
   * trying stays locked out). Default `false`: the block ends when it was set to.
   */
  extendBlock?: boolean;
  /**
   * With `block`: the block's start forgets what the policy spent, so the first request after
   * the block opens a fresh window (the `@nestjs/throttler` meaning). Default `false`: the
   * state outlives the block.
   */
  blockResets?: boolean;
}

/** A validated policy: what the stores evaluate. */
export interface Policy {
  readonly name: string;
  /** Units admitted per period. */
  readonly limit: number;
  /** Period in **milliseconds**. */
  readonly periodMs: number;
  /** `'concurrency'` for a concurrency limit: `limit` slots, leases of `periodMs` = `leaseMs`. */
  readonly algorithm: PolicyAlgorithm;
  /** Largest cost ever admitted at once: `burst ?? limit` for token-bucket and gcra, else `limit`. */
  readonly capacity: number;
  readonly scope?: string;
  readonly cost?: number;
  /** The penalty's length in **ms** (see {@link PolicyInput.block}). */
  readonly blockMs?: number;
  /** A refusal during the block starts it again. */
  readonly extendBlock?: true;
  /** The block's start deletes the policy's state (see {@link PolicyInput.blockResets}). */
  readonly blockResets?: true;
  /** A concurrency limit's lease, in **ms** (also its `periodMs`). */
  readonly leaseMs?: number;
}

// The verdicts (Decision, PolicyDecision) live in decision.ts; re-exported here.
export type { Decision, DenyReason, PolicyDecision } from './decision.js';

/**
 * One policy of a request, for `RateLimiter.consumeEach`: policies of one request
 * may limit different identities (the route per IP, the API per user).
 */
export interface LimitEntry {
  /** Who is limited by this policy, e.g. `user:42`. */
  identity: string;
  policy: Policy | PolicyInput;
  /** Units to spend under this policy; default: the policy's `cost`, else the call's. */
  cost?: number;
  /** Scope when the policy names none; default: the call's `scope`. */
  scope?: string;
}

const NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
const SCOPE_PATTERN = /^[A-Za-z0-9_.\-/]{1,128}$/;

/**
 * Validates a policy once, at definition or bootstrap time.
 *
 * @param where where it came from, quoted in errors (e.g. `ReportsController.export`)
 * @throws {RateLimitConfigError} with code `ERR_RATE_LIMIT_RATE`, `_ALGORITHM`, `_LOG_SIZE`
 *   (a `sliding-log` limit above {@link MAX_LOG_ENTRIES}), `_BURST`, `_COST`, `_NAME` or `_SCOPE`, quoting the offending value; `ERR_RATE_LIMIT_POLICY_OPTION`
 *   for a policy that is no object
 */
export function resolvePolicy(input: PolicyInput, where?: string): Policy {
  if (input === null || typeof input !== 'object') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_POLICY_OPTION',
      `invalid policy ${quote(input)}: expected { rate, ... }`,
      where,
    );
  }
  const name = input.name === undefined ? 'default' : input.name;
  if (input.concurrent !== undefined) return concurrencyPolicy(input, name, where);
  const { limit, periodMs } = parseRateOf(
    input.rate!,
    name,
    where,
    input.algorithm === 'fixed-window',
  );
  checkName(name, where);
  const algorithm = input.algorithm === undefined ? 'token-bucket' : input.algorithm;
  if (!ALGORITHMS.includes(algorithm)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_ALGORITHM',
      `unknown algorithm ${quote(algorithm)} in policy "${name}": use one of ${ALGORITHMS.join(', ')}`,
      where,
    );
  }
  if (algorithm === 'sliding-log' && limit > MAX_LOG_ENTRIES) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_LOG_SIZE',
      `limit ${limit} in policy "${name}" is too large for a sliding-log (one entry per unit): at most ${MAX_LOG_ENTRIES}`,
      where,
    );
  }
  const capacity = resolveCapacity(input.burst, algorithm, limit, periodMs, name, where);
  if (input.scope !== undefined) checkScope(input.scope, where);
  if (input.cost !== undefined) checkCost(input.cost, capacity, name, where);
  const blockMs =
    input.block === undefined
      ? undefined
      : parseDurationMs(input.block, 'ERR_RATE_LIMIT_BLOCK', `block in policy "${name}"`, where);
  for (const flag of ['extendBlock', 'blockResets'] as const) {
    if (input[flag] !== undefined && typeof input[flag] !== 'boolean') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_BLOCK',
        `invalid ${flag} ${quote(input[flag])} in policy "${name}": expected a boolean`,
        where,
      );
    }
  }
  const policy: Policy = Object.freeze({
    name,
    limit,
    periodMs,
    algorithm,
    capacity,
    ...(input.scope !== undefined && { scope: input.scope }),
    ...(input.cost !== undefined && { cost: input.cost }),
    ...(blockMs !== undefined && { blockMs }),
    ...(blockMs !== undefined && input.extendBlock === true && { extendBlock: true as const }),
    ...(blockMs !== undefined && input.blockResets === true && { blockResets: true as const }),
  });
  validated.add(policy);
  return policy;
}

const validated = new WeakSet<object>();

function checkName(name: unknown, where?: string): asserts name is string {
  if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_NAME',
      `invalid policy name ${quote(name)}: use 1-64 of A-Z a-z 0-9 _ . -`,
      where,
    );
  }
}

/** A concurrency limit (see `concurrency.ts`): `limit` slots, leases of `leaseMs`. */
function concurrencyPolicy(input: PolicyInput, name: unknown, where?: string): Policy {
  const { limit, leaseMs } = concurrencyOf(input, name, where);
  checkName(name, where);
  if (input.scope !== undefined) checkScope(input.scope, where);
  const policy: Policy = Object.freeze({
    name,
    limit,
    periodMs: leaseMs,
    algorithm: 'concurrency' as const,
    capacity: limit,
    leaseMs,
    ...(input.scope !== undefined && { scope: input.scope }),
  });
  validated.add(policy);
  return policy;
}

/**
 * A validated policy from either form: a {@link Policy} made by {@link resolvePolicy}
 * passes as it is; a policy-shaped object (`limit`, `periodMs`, `capacity`, no `rate`) is
 * checked like an input; anything else is resolved as a {@link PolicyInput}.
 * @throws {RateLimitConfigError}
 */
export function toPolicy(value: Policy | PolicyInput, where?: string): Policy {
  if (validated.has(value)) return value as Policy;
  const p = value as Partial<Policy> & Partial<PolicyInput>;
  if (p !== null && typeof p === 'object' && p.rate === undefined && p.capacity !== undefined) {
    if (p.leaseMs !== undefined) {
      return resolvePolicy(
        { name: p.name, concurrent: p.limit, leaseMs: p.leaseMs, scope: p.scope },
        where,
      );
    }
    const windowed = p.algorithm !== 'token-bucket' && p.algorithm !== 'gcra';
    return resolvePolicy(
      {
        name: p.name,
        rate: { limit: p.limit!, periodMs: p.periodMs! },
        algorithm: p.algorithm as Algorithm,
        burst: windowed || p.capacity === p.limit ? undefined : p.capacity,
        scope: p.scope,
        cost: p.cost,
        block: p.blockMs,
        extendBlock: p.extendBlock,
        blockResets: p.blockResets,
      },
      where,
    );
  }
  return resolvePolicy(value as PolicyInput, where);
}

function parseRateOf(rate: RateInput, name: unknown, where?: string, fixedWindow = false) {
  try {
    return parseRate(rate, undefined, fixedWindow);
  } catch (error) {
    if (!(error instanceof RateLimitConfigError)) throw error;
    throw new RateLimitConfigError(error.code, `${error.detail} in policy ${quote(name)}`, where);
  }
}

function resolveCapacity(
  burst: unknown,
  algorithm: Algorithm,
  limit: number,
  periodMs: number,
  name: string,
  where?: string,
): number {
  if (burst === undefined) return limit;
  if (algorithm !== 'token-bucket' && algorithm !== 'gcra') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_BURST',
      `burst ${quote(burst)} in policy "${name}" applies only to token-bucket and gcra, not ${algorithm}`,
      where,
    );
  }
  if (!isPositiveInteger(burst) || burst * periodMs > MAX_SCALED) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_BURST',
      `invalid burst ${quote(burst)} in policy "${name}": expected an integer >= 1 (burst × periodMs <= 2^50)`,
      where,
    );
  }
  return burst;
}

/**
 * Checks a scope name: 1-128 of `A-Z a-z 0-9 _ . - /` (it is part of the Redis key).
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_SCOPE`
 */
export function checkScope(scope: unknown, where?: string): asserts scope is string {
  if (typeof scope !== 'string' || !SCOPE_PATTERN.test(scope)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_SCOPE',
      `invalid scope ${quote(scope)}: use 1-128 of A-Z a-z 0-9 _ . - /`,
      where,
    );
  }
}

/**
 * Checks a cost: an integer >= 0 and, when `capacity` is given, no greater than it
 * (a larger cost could never be admitted).
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_COST`
 */
export function checkCost(
  cost: unknown,
  capacity: number | undefined,
  name: string | undefined,
  where?: string,
): asserts cost is number {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    const of = name === undefined ? '' : ` for policy "${name}"`;
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_COST',
      `invalid cost ${quote(cost)}${of}: expected an integer >= 0`,
      where,
    );
  }
  if (capacity !== undefined && cost > capacity) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_COST',
      `cost ${cost} for policy "${name}" exceeds its capacity ${capacity}: it could never be admitted`,
      where,
    );
  }
}
