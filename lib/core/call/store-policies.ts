import { ALGORITHM_IMPLS } from '../algorithms/index.js';
import { newLeaseId } from '../algorithms/concurrency.js';
import { quote, RateLimitConfigError } from '../errors.js';
import { seeErrorsPage } from '../errors-page.js';
import { policyKey } from '../model/store-keys.js';
import {
  checkCost,
  checkScope,
  toPolicy,
  type Decision,
  type LimitEntry,
  type Policy,
  type PolicyDecision,
} from '../model/policy.js';
import type { StoreOutcome, StorePolicy } from '../stores/store.js';

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
  // A plain loop and objects of one shape: this runs for every request.
  const out: StorePolicy[] = new Array<StorePolicy>(entries.length);
  let budgets: Set<string> | undefined;
  for (let i = 0; i < entries.length; i++) {
    const { identity, policy: input, cost: entryCost, scope: entryScope } = entries[i]!;
    if (typeof identity !== 'string') {
      throw Object.assign(
        new TypeError(
          `rate-limit identity must be a string, got ${quote(identity)} [ERR_RATE_LIMIT_IDENTITY] ${seeErrorsPage('ERR_RATE_LIMIT_IDENTITY')}`,
        ),
        { code: 'ERR_RATE_LIMIT_IDENTITY' },
      );
    }
    const policy = toPolicy(input);
    if (entryScope !== undefined) checkScope(entryScope);
    const policyScope = policy.scope ?? entryScope ?? scope;
    // Identity, scope and name identify a budget; two on one request would count twice
    // against it. (Scopes and names cannot hold NUL; a single entry has nothing to clash with.)
    if (entries.length > 1) {
      const budget = `${identity}\0${policyScope}\0${policy.name}`;
      budgets ??= new Set<string>();
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
    const stored: Mutable<StorePolicy> = {
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
    };
    // Set only when present: a store tells them apart with `!== undefined` and `in` alike.
    if (policy.blockMs !== undefined) stored.blockMs = policy.blockMs;
    if (policy.extendBlock) stored.extendBlock = true;
    if (policy.blockResets) stored.blockResets = true;
    if (refundable && !lease) stored.refundable = true;
    if (lease && !peek && spend > 0) stored.lease = newLeaseId();
    out[i] = stored;
  }
  return out;
}

/** `T` with its fields writable: for objects of one shape, filled in before they are handed out. */
export type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** The decision of the store's outcomes, in the order of `policies`. */
export function decisionOf(policies: Policy[], outcomes: StoreOutcome[]): Decision {
  const decisions: PolicyDecision[] = new Array<PolicyDecision>(outcomes.length);
  let allowed = true;
  let tooCostly = false;
  for (let i = 0; i < outcomes.length; i++) {
    const o = outcomes[i]!;
    const decision: Mutable<PolicyDecision> = {
      name: policies[i]!.name,
      allowed: o.allowed,
      limit: o.override?.limit ?? policies[i]!.limit,
      remaining: o.remaining,
      resetMs: o.resetMs,
      retryAfterMs: o.retryAfterMs,
    };
    if (o.blocked) decision.blocked = true;
    else if (o.exempt) decision.exempt = true;
    else if (o.override) decision.override = { periodMs: o.override.periodMs };
    decisions[i] = decision;
    if (!o.allowed) allowed = false;
    if (o.retryAfterMs === Infinity) tooCostly = true;
  }
  if (allowed) return { allowed: true, policies: decisions };
  return {
    allowed: false,
    reason: tooCostly ? 'cost_exceeds_limit' : 'limit_exceeded',
    policies: decisions,
  };
}
