import { keys } from '../declare/keys.js';
import type { Decide, RoutePlan } from '../pipeline/call.js';
import type { Engine } from '../pipeline/engine.js';
import { enforceFixed } from '../pipeline/stages/enforce.js';
import type { IdentityOf } from '../pipeline/stages/identify.js';
import { observed } from '../pipeline/stages/observe.js';
import { NO_LIMIT, type RequestOutcome } from '../pipeline/outcome.js';
import { decideInStages } from '../pipeline/stages/step.js';
import type { Route } from './rules.js';

const ADMITTED: Promise<RequestOutcome> = Promise.resolve(NO_LIMIT);
const NOTHING: Decide = () => ADMITTED;

/**
 * Compiles a route's plan: for each step, the stages it runs and what they answer without
 * the store, chosen once, here, and not on every request (the stages are drawn in
 * docs/reference/request-lifecycle.md).
 */
export function compile(route: Route, engine: Engine): RoutePlan {
  const { decide, stages } = compileStep(route, engine);
  const later = route.afterGuards;
  if (later === undefined) {
    return { name: route.name, route, stages, decide, limited: decide !== NOTHING };
  }
  const user = compileStep(later, engine);
  const refused = later.unauthenticated;
  const address = refused ? compileAddress(refused, engine) : NOTHING;
  return {
    name: route.name,
    route,
    stages: [...stages, 'defer', ...user.stages.filter((s) => s !== 'gate')],
    decide,
    limited: true,
    deferred: { address, user: user.decide },
  };
}

/** The stages of one step of `route`, and their names in order. */
function compileStep(route: Route, engine: Engine): { decide: Decide; stages: string[] } {
  if (route.enforced.length === 0 && route.shadowed.length === 0) {
    return { decide: NOTHING, stages: ['gate'] };
  }
  // Chosen once per route: a fail-closed route's 503, or admission.
  const failure = failureOf(route, engine);
  const fast =
    route.fixed && !route.counting && route.shadowed.length === 0 && route.enforced.length > 0;
  const decide: Decide = fast
    ? (ctx, identities, trace) => {
        const fixed = engine.entries.fixedEntries(route, identities);
        // An identity still to come (an async key function): the general path awaits it.
        return fixed === undefined
          ? decideInStages(engine, ctx, route, identities, trace, failure)
          : enforceFixed(engine, route, fixed, trace, failure);
      }
    : (ctx, identities, trace) => decideInStages(engine, ctx, route, identities, trace, failure);
  const observing = engine.observer !== undefined || engine.tracing !== undefined;
  const stages = [
    'gate',
    'identify',
    'entries',
    'enforce',
    // In place of `shape` when the store does not answer.
    'store-failure',
    'shape',
    ...(route.shadowed.length > 0 ? ['shadow'] : []),
    'deliver',
  ];
  return {
    decide: observed(engine, route, decide),
    stages: observing ? ['observe', ...stages] : stages,
  };
}

/**
 * The address budgets of requests a route's own guards refuse (see `defer.ts`), spent
 * against the client's address whatever the policies' keys: the user is not known yet.
 * Never observed: the request is observed once, when its user policies are decided.
 */
function compileAddress(refused: Route, engine: Engine): Decide {
  if (refused.enforced.length === 0) return NOTHING;
  const failure = failureOf(refused, engine);
  return (ctx, identities, trace) => {
    const address: IdentityOf = () => identities(keys.ip);
    return decideInStages(engine, ctx, refused, address, trace, failure);
  };
}

/** What a step answers when its store does not: a fail-closed route's 503 (new each time), else admission. */
function failureOf(route: Route, engine: Engine): () => RequestOutcome {
  if (!route.enforced.some((r) => r.failClosed)) return () => NO_LIMIT;
  return () => engine.shape.failure(route.enforced);
}
