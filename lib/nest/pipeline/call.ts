import type { ExecutionContext } from '@nestjs/common';
import type { Spending } from '../../core/limiter.js';
import type { Decision } from '../../core/model/policy.js';
import type { RequestLike } from '../../http/ip.js';
import type { Trace } from '../observability/observer.js';
import type { Route } from '../plan/rules.js';
import type { Transport } from '../transports/transport.js';
import type { Entries } from './entry-resolver.js';
import type { IdentityOf } from './stages/identify.js';
import type { RequestOutcome } from './outcome.js';

/**
 * One guarded call as the guard carries it, built once per call: the context (for user
 * functions), its transport, the carrier the outcome is stored on, the request the client
 * address is read from (undefined where the transport has none), the plan of its route, and
 * the guard's `refuse` (a subclass's override included), for a stage that answers later.
 */
export interface Call {
  readonly ctx: ExecutionContext;
  readonly transport: Transport;
  readonly carrier: object;
  readonly request: RequestLike | undefined;
  readonly plan: RoutePlan;
  readonly refuse: (ctx: ExecutionContext, outcome: RequestOutcome) => never;
}

/**
 * What the stages of one step fill in as they run, one per decision: each stage reads what
 * the stages before it left, and the next stage, or the end of the step, answers `outcome`.
 */
export interface StepState {
  /** What rate and cost functions are given; undefined for a WebSocket connection limit. */
  readonly ctx: ExecutionContext | undefined;
  readonly identities: IdentityOf;
  /** The guarded call; undefined outside the guard (connection limits, GraphQL operations). */
  readonly call: Call | undefined;
  /** Defined only when the request is observed (the observe stage sets it). */
  trace: Trace | undefined;
  /** The entries stage's store entries. */
  entries: Entries | undefined;
  /** The enforce stage's decision, when the store answered. */
  decision: Decision | undefined;
  /** What the enforce stage spent on a route that counts by outcome (`count`). */
  spending: Spending | undefined;
  /** The enforce stage's store call failed, with `error`. */
  failed: boolean;
  error: unknown;
  /** What the step answers if no stage answers otherwise: `NO_LIMIT` until shaped. */
  outcome: RequestOutcome;
}

/** An outcome now, or later: a stage answers synchronously when it can. */
export type Answer = RequestOutcome | Promise<RequestOutcome>;

/** The rest of a step, after a stage: the stages that follow it, compiled. */
export type Next = (state: StepState) => Answer;

/**
 * What one stage runs per decision: it answers itself (a refusal, a store failure), or
 * hands the state on to `next` (before, after, or around it). Never an async function on a
 * route with fixed policies: each would add promises and microtask turns per request.
 */
export type StageRun = (state: StepState, next: Next) => Answer;

/** A stage of a compiled plan: its name (see ARCHITECTURE.md) and what it runs. */
export interface Stage {
  readonly name: string;
  readonly run: StageRun;
}

/**
 * The stages of one step of a route, compiled into one function (see `plan/compile.ts`).
 *
 * @param ctx what rate and cost functions are given; a WebSocket connection limit, whose
 *   policy is fixed, has none
 * @param call the guarded call, for the defer stage; undefined outside the guard
 */
export type Decide = (
  ctx: ExecutionContext | undefined,
  identities: IdentityOf,
  call?: Call,
) => Promise<RequestOutcome>;

/**
 * What a stage is compiled for (see `plan/compile.ts`): one step of a route, whether it is
 * observed, and on the first step of a route with guards of its own, the steps the defer
 * stage runs after it.
 */
export interface StepSpec {
  readonly route: Route;
  readonly observed: boolean;
  readonly deferred: Deferred | undefined;
}

/** One step compiled: the stages it runs, in order, and the function that runs them. */
export interface CompiledStep {
  /** Exactly what `decide` runs, in order: a stage a route has no use for is not there. */
  readonly stages: readonly Stage[];
  readonly decide: Decide;
}

/**
 * Everything about a route that does not depend on the request, compiled once per handler
 * at bootstrap (see docs/reference/request-lifecycle.md).
 */
export interface RoutePlan extends CompiledStep {
  /** `Controller.handler`, for logs. */
  readonly name: string;
  /** Its rules, split by mode and step. */
  readonly route: Route;
  /** False when no stage runs: the guard admits at once, building nothing. */
  readonly limited: boolean;
  /**
   * On an HTTP route with guards of its own whose policies need the user: the two steps the
   * defer stage runs (see `stages/defer.ts`). Undefined when everything is decided at once.
   */
  readonly deferred?: Deferred;
}

/** The steps of a route whose per-user policies wait for its own guards. */
export interface Deferred {
  /** Spends the address budgets of requests those guards refuse, before they run. */
  readonly address: CompiledStep;
  /** The per-user policies, once those guards have admitted the request. */
  readonly user: CompiledStep;
}
