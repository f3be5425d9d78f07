import { keys } from '../declare/keys.js';
import type {
  CompiledStep,
  Decide,
  Deferred,
  Next,
  RoutePlan,
  Stage,
  StageRun,
  StepSpec,
  StepState,
} from '../pipeline/call.js';
import { NO_LIMIT, type RequestOutcome } from '../pipeline/outcome.js';
import type { StageServices } from '../pipeline/services.js';
import { deferStage } from '../pipeline/stages/defer.js';
import { enforceStage } from '../pipeline/stages/enforce.js';
import { entriesStage } from '../pipeline/stages/entries.js';
import { observeStage } from '../pipeline/stages/observe.js';
import { shadowStage } from '../pipeline/stages/shadow.js';
import { shapeStage } from '../pipeline/stages/shape.js';
import { storeFailureStage } from '../pipeline/stages/store-failure.js';
import type { Route } from './rules.js';

/**
 * What a stage runs for one step of a route, built once when the route's plan is compiled;
 * undefined when the step has no use for the stage, which is then not on its path at all.
 */
type StageOf = (step: StepSpec, services: StageServices) => StageRun | undefined;

/**
 * Every stage a step may run, in the order a call meets them (the guard runs gate and
 * identify before, deliver after: see docs/reference/request-lifecycle.md). A stage is added
 * here: its name and what builds it. Each step of each route runs only the stages built for
 * it, so a route with fixed policies runs entries → enforce → store-failure → shape: one
 * store call, no async function. A stage runs before `next`, after it, or around it
 * (observe, defer), and may answer without calling it (the rest then does not run).
 */
const STAGES: readonly (readonly [name: string, build: StageOf])[] = [
  ['defer', deferStage],
  ['observe', observeStage],
  ['entries', entriesStage],
  ['enforce', enforceStage],
  // In place of shape, and of every stage after it, when the store did not answer.
  ['store-failure', storeFailureStage],
  ['shape', shapeStage],
  ['shadow', shadowStage],
];

const ADMITTED: Promise<RequestOutcome> = Promise.resolve(NO_LIMIT);
const NOTHING: CompiledStep = { stages: [], decide: () => ADMITTED };

/** The end of every step: what the stages answered. */
const answered: Next = (state) => state.outcome;

/**
 * Compiles a route's plan: for each step, the stages it runs, chosen once, here, and not on
 * every request.
 */
export function compile(route: Route, services: StageServices): RoutePlan {
  const later = route.afterGuards;
  const deferred: Deferred | undefined = later && {
    address: compileAddress(later.unauthenticated, services),
    user: compileStep({ route: later, observed: true, deferred: undefined }, services),
  };
  const { stages, decide } = compileStep({ route, observed: true, deferred }, services);
  return {
    name: route.name,
    route,
    stages,
    decide,
    limited: stages.length > 0,
    ...(deferred && { deferred }),
  };
}

/** The stages of one step, chained: each stage's `next` is the one after it. */
function compileStep(step: StepSpec, services: StageServices): CompiledStep {
  const stages: Stage[] = [];
  for (const [name, build] of STAGES) {
    const run = build(step, services);
    if (run !== undefined) stages.push({ name, run });
  }
  if (stages.length === 0) return NOTHING;
  const first = stages.reduceRight<Next>(
    (next, { run }) =>
      (state) =>
        run(state, next),
    answered,
  );
  const decide: Decide = (ctx, identities, call) => {
    const state: StepState = {
      ctx,
      identities,
      call,
      trace: undefined,
      entries: undefined,
      decision: undefined,
      spending: undefined,
      failed: false,
      error: undefined,
      outcome: NO_LIMIT,
    };
    const answer = first(state);
    return answer instanceof Promise ? answer : Promise.resolve(answer);
  };
  return { stages, decide };
}

/**
 * The address budgets of requests a route's own guards refuse (see `stages/defer.ts`), spent
 * against the client's address whatever the policies' keys: the user is not known yet.
 * Never observed: the request is observed once, when its user policies are decided.
 */
function compileAddress(refused: Route | undefined, services: StageServices): CompiledStep {
  if (refused === undefined || refused.enforced.length === 0) return NOTHING;
  const step = compileStep({ route: refused, observed: false, deferred: undefined }, services);
  return {
    stages: step.stages,
    decide: (ctx, identities) => step.decide(ctx, () => identities(keys.ip)),
  };
}
