import { resolvePolicy, type Policy } from '../../core/model/policy.js';
import type { CostFn, RateFn, RateLimitOptions, StoreFailureMode } from '../declare/decorators.js';
import type { KeyFn } from '../declare/keys.js';

/** A controller class or a handler method: what Nest's reflection reads metadata from. */
export type Target = { readonly name: string };

/** One policy as it applies to one route, with every default filled in. */
export interface Rule {
  readonly name: string;
  readonly policy?: Policy;
  readonly rateFn?: RateFn;
  readonly options: RateLimitOptions;
  readonly scope: string;
  readonly key: KeyFn;
  readonly cost: number | CostFn;
  /** `onStoreFailure === 'closed'`. */
  readonly failClosed: boolean;
  /** What this policy does while the store fails (defaults resolved). */
  readonly onStoreFailure: StoreFailureMode;
  readonly shadow: boolean;
  readonly headers: boolean;
  readonly exposeDetails: boolean;
  readonly where: string;
  /**
   * On an address budget (see {@link unauthenticatedRule}) whose rate comes from a rate
   * function: the burst its per-request policy is given (see {@link addressPolicy}).
   */
  readonly addressBurst?: number;
}

/** The rules of one route, split once by mode. */
export interface Route {
  /** `Controller.handler`, for logs. */
  readonly name: string;
  readonly enforced: readonly Rule[];
  readonly shadowed: readonly Rule[];
  /** Every enforced rule has a fixed policy and cost: nothing to await but its identity. */
  readonly fixed: boolean;
  /** Some enforced rule counts by outcome (`count`): its requests are settled once answered. */
  readonly counting: boolean;
  /**
   * The rules whose key needs the authenticated user, on a route with guards of its own:
   * decided after those guards have run (see `pipeline/stages/after-route-guards.ts`); the rules above
   * are decided first, by the global guard. Undefined when everything is decided first.
   */
  readonly afterGuards?: Route;
  /**
   * On {@link Route.afterGuards}: the same policies as budgets of the client's address for
   * requests the route's guards refuse (failed authentication), in scopes of their own
   * (`<scope>/unauthenticated`), so that they never spend an address's anonymous budget.
   */
  readonly unauthenticated?: Route;
}

/**
 * How many requests of one address may be in flight to a route's own guards at once (and,
 * with none given back, how many its guards may refuse in a row) before the address is
 * refused: the default {@link RateLimitOptions.addressBurst}. Sized for an office or a
 * carrier NAT whose users log in together; the sustained rate stays the policy's own.
 */
export const DEFAULT_ADDRESS_BURST = 20;

/**
 * A policy as the budget of an address's requests that the route's guards refuse: spent
 * before the guards run and given back when they admit (counted as `count: 'failed'`, so
 * requests in flight together all count); no user yet, so a cost function (which may read
 * the user) counts 1; never fail-closed (a store outage must not refuse the users those
 * guards would admit); a token bucket at the policy's rate with a burst of at least
 * `addressBurst` (see {@link addressPolicy}); and without the policy's `block`: the address
 * is shared by everyone behind one NAT, so a penalty there would lock out the valid users
 * with the guesser. The block stays on the per-user policy.
 */
export function unauthenticatedRule(rule: Rule, addressBurst: number): Rule {
  return {
    ...rule,
    policy: rule.policy && addressPolicy(rule.policy, addressBurst, rule.where),
    options: {
      ...rule.options,
      count: 'failed',
      failed: undefined,
      block: undefined,
      extendBlock: undefined,
    },
    scope: `${rule.scope.slice(0, 112)}/unauthenticated`,
    cost: typeof rule.cost === 'number' ? rule.cost : 1,
    failClosed: false,
    addressBurst,
  };
}

/**
 * The address budget of `policy`: a token bucket refilling at the policy's rate (its `limit`
 * per `periodMs`), whatever the policy's algorithm, holding `max(capacity, addressBurst)`.
 * Valid users get their unit back as soon as the guards admit them, so they only borrow the
 * burst while they are in flight: many of them behind one address pass together, while a
 * guesser, whose units are never given back, gets the burst once and then the policy's rate.
 *
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_BURST` when burst × periodMs exceeds 2^50
 */
export function addressPolicy(policy: Policy, addressBurst: number, where: string): Policy {
  return resolvePolicy(
    {
      name: policy.name,
      rate: { limit: policy.limit, periodMs: policy.periodMs },
      algorithm: 'token-bucket',
      burst: Math.max(policy.capacity, addressBurst),
      scope: policy.scope,
      cost: policy.cost,
    },
    `${where} (address budget)`,
  );
}

/** The rules of a route, split by mode. */
export function routeOfRules(name: string, rules: readonly Rule[]): Route {
  const enforced = rules.filter((r) => !r.shadow);
  return {
    name,
    enforced,
    shadowed: rules.filter((r) => r.shadow),
    fixed: enforced.every((r) => r.policy !== undefined && typeof r.cost === 'number'),
    counting: enforced.some((r) => r.options.count !== undefined),
  };
}

/** A concurrency limit: slots in flight, not a rate. */
export function isConcurrency(policy: Policy | undefined): boolean {
  return policy?.algorithm === 'concurrency';
}
