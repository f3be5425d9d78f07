import { ALGORITHM_IMPLS } from './algorithms/index.js';
import { newLeaseId } from './concurrency.js';
import { quote, RateLimitConfigError } from './errors.js';
import { policyKey } from './keys.js';
import {
  checkCost,
  checkScope,
  toPolicy,
  type Decision,
  type Policy,
  type PolicyDecision,
} from './policy.js';
import type { LimitEntry } from './limiter.js';
import type { StoreOutcome, StorePolicy } from './stores/store.js';

/**
 * What the store is asked for one call: a key, rate and cost per entry, in the entries'
 * order. Validates each entry's policy, scope and cost, and pushes the validated policies
 * onto `policies` (for {@link decisionOf}).
 *
 * @param scope scope of entries and policies that name none
 * @param cost units of entries and policies that set none
 * @param peek spend nothing (cost 0 everywhere)
 * @throws {RateLimitConfigError} for an invalid policy, cost or scope, or two entries on
 *   one budget (identity, scope and name)
 * @throws {TypeError} for an identity that is not a string
 */
export function storePoliciesOf(
  prefix: string,
  entries: readonly LimitEntry[],
  scope: string,
  cost: number,
  peek: boolean,
  policies: Policy[],
  refundable = false,
): StorePolicy[] {
  const budgets = new Set<string>();
  return entries.map(
    ({ identity, policy: input, cost: entryCost, scope: entryScope }): StorePolicy => {
      if (typeof identity !== 'string') {
        throw new TypeError(`rate-limit identity must be a string, got ${quote(identity)}`);
      }
      const policy = toPolicy(input);
      if (entryScope !== undefined) checkScope(entryScope);
      const policyScope = policy.scope ?? entryScope ?? scope;
      // Identity, scope and name identify a budget; two on one request would count twice
      // against it. (Scopes and names cannot hold NUL; a single entry has nothing to clash with.)
      if (entries.length > 1) {
        const budget = `${identity}\0${policyScope}\0${policy.name}`;
        if (budgets.has(budget)) {
          throw new RateLimitConfigError(
            'ERR_RATE_LIMIT_DUPLICATE_POLICY',
            `two policies named "${policy.name}" in scope "${policyScope}" on one request`,
          );
        }
        budgets.add(budget);
      }
      let spend = entryCost ?? policy.cost ?? cost;
      if (entryCost !== undefined) checkCost(entryCost, undefined, policy.name);
      policies.push(policy);
      // A concurrency limit: one request, one slot, whatever the request's cost (0 peeks).
      const lease = policy.leaseMs !== undefined;
      if (lease) spend = Math.min(1, spend);
      return {
        key: policyKey(
          prefix,
          identity,
          policyScope,
          policy.name,
          ALGORITHM_IMPLS[policy.algorithm].tag,
        ),
        algorithm: policy.algorithm,
        limit: policy.limit,
        periodMs: policy.periodMs,
        capacity: policy.capacity,
        cost: peek ? 0 : spend,
        ...(policy.blockMs !== undefined && { blockMs: policy.blockMs }),
        ...(policy.extendBlock && { extendBlock: true as const }),
        ...(refundable && !lease && { refundable: true as const }),
        ...(lease && !peek && spend > 0 && { lease: newLeaseId() }),
      };
    },
  );
}

/** The decision of the store's outcomes, in the order of `policies`. */
export function decisionOf(policies: Policy[], outcomes: StoreOutcome[]): Decision {
  const decisions: PolicyDecision[] = outcomes.map((o, i) => {
    const decision: PolicyDecision = {
      name: policies[i]!.name,
      allowed: o.allowed,
      limit: o.override?.limit ?? policies[i]!.limit,
      remaining: o.remaining,
      resetMs: o.resetMs,
      retryAfterMs: o.retryAfterMs,
    };
    if (o.blocked) return { ...decision, blocked: true };
    if (o.exempt) return { ...decision, exempt: true };
    if (o.override) return { ...decision, override: { periodMs: o.override.periodMs } };
    return decision;
  });
  if (decisions.every((d) => d.allowed)) return { allowed: true, policies: decisions };
  const reason = decisions.some((d) => d.retryAfterMs === Infinity)
    ? 'cost_exceeds_limit'
    : 'limit_exceeded';
  return { allowed: false, reason, policies: decisions };
}
