import type { Entries } from '../entry-resolver.js';
import type { Answer, Next, StageRun, StepSpec, StepState } from '../call.js';
import type { StageServices } from '../services.js';

/**
 * The entries stage: the step's enforced rules become store entries (identity, policy,
 * cost), rate and cost functions resolved (see `EntryResolver`). On a route with fixed
 * policies whose identities are known at once, synchronously: no promise before the store
 * call. Not on a step without enforced policies (shadow policies resolve their own).
 */
export function entriesStage(step: StepSpec, services: StageServices): StageRun | undefined {
  const { route } = step;
  if (route.enforced.length === 0) return undefined;
  const resolver = services.entries;
  const resolved = (state: StepState, next: Next) => (entries: Entries) =>
    withEntries(services, state, next, entries);
  const resolve = (state: StepState, next: Next): Answer =>
    resolver
      .entriesOf(state.ctx, route, route.enforced, state.identities)
      .then(resolved(state, next));
  if (!route.fixed) return resolve;
  return (state, next) => {
    const fixed = resolver.fixedEntries(route, state.identities);
    // An identity still to come (an async key function): resolved as any route's.
    if (fixed === undefined) return resolve(state, next);
    state.entries = fixed;
    return next(state);
  };
}

/**
 * The step goes on with `entries`, unless a policy was left with none (its rate function
 * never answered, or it is fail-closed and its cost function threw): that refuses as a
 * fail-closed policy does when its store is down, since left out it would lift its limit for
 * whoever makes the function throw. Except an address budget (of requests a route's guards
 * refuse), spent before any user is known, which a rate function may need: its own policy
 * still applies, after the guards.
 */
function withEntries(
  services: StageServices,
  state: StepState,
  next: Next,
  entries: Entries,
): Answer {
  const { broken } = entries;
  if (broken.length > 0 && broken.some((r) => r.addressBurst === undefined)) {
    if (state.trace) state.trace.brokenClosed = true;
    return services.shape.unavailable();
  }
  state.entries = entries;
  return next(state);
}
