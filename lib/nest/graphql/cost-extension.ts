import type { PolicyDecision } from '../../core/model/decision.js';
import type { Rule } from '../plan/rules.js';
import type { RequestOutcome } from '../pipeline/outcome.js';

/**
 * `extensions.cost` of a response, with Shopify's field names. Points; `restoreRate` in
 * points per second.
 */
export interface OperationCostExtension {
  requestedQueryCost: number;
  /** Null when the operation did not run (refused before execution). */
  actualQueryCost: number | null;
  /**
   * The most restrictive budget once this operation's refund is in; absent when no budget
   * decided (no budget, skipped, exempt, or its store did not answer).
   */
  throttleStatus?: { maximumAvailable: number; currentlyAvailable: number; restoreRate: number };
}

/**
 * `extensions.cost` for an operation charged `requested` points under `outcome`, given back
 * `refunded` points after it ran.
 * @param rules the budget's rules, in the order the store decided them
 */
export function costExtension(
  requested: number,
  actual: number | null,
  outcome: RequestOutcome,
  rules: readonly Rule[],
  refunded: number,
): OperationCostExtension {
  const cost: OperationCostExtension = { requestedQueryCost: requested, actualQueryCost: actual };
  let tightest: OperationCostExtension['throttleStatus'];
  outcome.decision?.policies.forEach((p: PolicyDecision, i) => {
    const policy = rules[i]?.policy;
    if (policy === undefined || p.exempt) return;
    const maximumAvailable = p.override ? p.limit : policy.capacity;
    const periodMs = p.override?.periodMs ?? policy.periodMs;
    const currentlyAvailable = Math.min(maximumAvailable, p.remaining + (p.allowed ? refunded : 0));
    if (tightest === undefined || currentlyAvailable < tightest.currentlyAvailable) {
      // Points per second, to the thousandth: what a client paces itself by.
      const restoreRate = Math.round((p.limit * 1_000_000) / periodMs) / 1000;
      tightest = { maximumAvailable, currentlyAvailable, restoreRate };
    }
  });
  if (tightest !== undefined) cost.throttleStatus = tightest;
  return cost;
}
