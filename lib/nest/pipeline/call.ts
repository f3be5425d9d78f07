import type { ExecutionContext } from '@nestjs/common';
import type { RequestLike } from '../../http/ip.js';
import type { Trace } from '../observability/observer.js';
import type { Route } from '../plan/rules.js';
import type { Transport } from '../transports/transport.js';
import type { IdentityOf } from './stages/identify.js';
import type { RequestOutcome } from './outcome.js';

/**
 * One guarded call as the pipeline carries it, built once per call by the guard: the
 * context (for user functions), its transport, the carrier the outcome is stored on, the
 * request the client address is read from (undefined where the transport has none), and the
 * plan of its route.
 */
export interface Call {
  readonly ctx: ExecutionContext;
  readonly transport: Transport;
  readonly carrier: object;
  readonly request: RequestLike | undefined;
  readonly plan: RoutePlan;
}

/**
 * The stages of one step of a route, compiled into one function (see `plan/compile.ts`):
 * entries → enforce → on store failure → shadow → shape. `trace` is defined only when the
 * request is observed (`onDecision`, metrics, a recording span): the stages fill it in,
 * on the same path as an unobserved request.
 *
 * @param ctx what rate and cost functions are given; a WebSocket connection limit, whose
 *   policy is fixed, has none
 */
export type Decide = (
  ctx: ExecutionContext | undefined,
  identities: IdentityOf,
  trace: Trace | undefined,
) => Promise<RequestOutcome>;

/**
 * Everything about a route that does not depend on the request, compiled once per handler
 * at bootstrap (see docs/reference/request-lifecycle.md).
 */
export interface RoutePlan {
  /** `Controller.handler`, for logs. */
  readonly name: string;
  /** Its rules, split by mode and step. */
  readonly route: Route;
  /** The stages a call of this route meets, in order, by name (see ARCHITECTURE.md). */
  readonly stages: readonly string[];
  /** False when no step has a policy: the guard admits at once, building nothing. */
  readonly limited: boolean;
  /** The decision of the policies decided before the route's own guards. */
  readonly decide: Decide;
  /**
   * On an HTTP route with guards of its own whose policies need the user: the deferral
   * stage's two decisions (see `defer.ts`). Undefined when everything is decided at once.
   */
  readonly deferred?: {
    /** Spends the address budgets of requests those guards refuse, before they run. */
    readonly address: Decide;
    /** The per-user policies, once those guards have admitted the request. */
    readonly user: Decide;
  };
}
