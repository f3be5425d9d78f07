import type { StageRun, StepSpec } from '../call.js';
import type { StageServices } from '../services.js';

/**
 * The shape stage: the store's decision as an outcome (headers, a transport-neutral refusal,
 * `rate_limit.blocked`; see `OutcomeShaper`), with what ends the call later: `settle` on an
 * admitted request that spent (`count`), `release` when slots were taken.
 */
export function shapeStage(step: StepSpec, services: StageServices): StageRun | undefined {
  const { route } = step;
  if (route.enforced.length === 0) return undefined;
  const { shape, ends } = services;
  return (state, next) => {
    const decision = state.decision;
    // Nothing was asked of the store (every policy left out): the step admits so far.
    if (decision === undefined) return next(state);
    const enforcing = state.entries!.entries;
    let outcome = shape.decided(decision, enforcing, route.name);
    const spending = state.spending;
    // The spreads last (the outcome has neither `settle` nor `release` yet): on Node 20,
    // properties added after a spread cost microseconds each.
    if (spending && outcome.allowed) {
      outcome = { settle: ends.settler(route.name, enforcing, spending), spending, ...outcome };
    }
    if (decision.leases) {
      outcome = { release: ends.releaser(route.name, decision.leases), ...outcome };
    }
    state.outcome = outcome;
    return next(state);
  };
}
