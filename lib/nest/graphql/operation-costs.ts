import * as common from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import type { DocumentNode, GraphQLSchema } from 'graphql';
import type { Spending } from '../../core/limiter.js';
import { actualCost, requestedCost } from '../../graphql/cost.js';
import {
  CostAnalysisLimitError,
  DEFAULT_OPERATION_LIMITS,
  OperationNotFoundError,
  operationLimitExceeded,
  type OperationLimits,
} from '../../graphql/limits.js';
import type { AppGraphQL } from './load-graphql.js';
import type { RoutePlan } from '../pipeline/call.js';
import { askSkip, Gate } from '../pipeline/stages/gate.js';
import { identitiesOf } from '../pipeline/stages/identify.js';
import { NO_LIMIT, type RequestOutcome } from '../pipeline/outcome.js';
import type { RoutePlanner } from '../plan/planner.js';
import type { Rule } from '../plan/rules.js';
import { keys } from '../declare/keys.js';
import { graphqlTransport } from '../transports/graphql.js';
import { refusalFields } from '../transports/refusal.js';
import { costExtension, type OperationCostExtension } from './cost-extension.js';
import { declareBudgets, LIMIT_OPTIONS, type GraphQLCostOptions } from './options.js';
import { limitRefusal, tooCostly, type OperationRefusal } from './refusals.js';
import { operationContext, requestedCostOf } from './operation-context.js';

/** One operation as a GraphQL server hands it over, validated, before execution. */
export interface OperationRequest {
  readonly schema: GraphQLSchema;
  readonly document: DocumentNode;
  readonly operationName?: string | null;
  /** Raw, as the request sent them. */
  readonly variables?: Readonly<Record<string, unknown>> | null;
  /** The server does not say what the variables are (`OperationInput.variablesUnknown`). */
  readonly variablesUnknown?: boolean;
  /** The context resolvers get: the HTTP request is read from it, as for a resolver. */
  readonly contextValue: unknown;
}

/** What was charged for one operation, before it ran. */
export interface Charge {
  /** The operation's requested cost, in points. */
  readonly requested: number;
  /** The budget's decision (`NO_LIMIT` without a budget, skipped, or failed open). */
  readonly outcome: RequestOutcome;
  /** The operation priced (see `OperationCosts.charge`). */
  readonly operationName?: string | null;
  /** The server did not name the operation of a document of several: the costliest was priced. */
  readonly guessed?: boolean;
}

export type { OperationRefusal } from './refusals.js';

/**
 * GraphQL operation cost, for any server: `charge` before execution (requested
 * cost, `maxCost`, the points budget, all-or-nothing, through the same stages as a route),
 * `settle` after it (actual cost, the refund of what was not used, `extensions.cost`). The
 * Apollo plugin and the Mercurius hooks (`apollo-plugin.ts`, `mercurius-hooks.ts`) call them.
 */
export class OperationCosts {
  private readonly plan: RoutePlan | undefined;
  private readonly gate: Gate;
  /** The budget's rules, in the order the store decides them. */
  readonly rules: readonly Rule[];
  /** The `maxCost` option (no maximum: Infinity). */
  private readonly maxCost: number;
  /** The operation limits, defaults filled in. */
  private readonly limits: OperationLimits;

  /** @throws {RateLimitConfigError} for an invalid budget */
  constructor(
    private readonly planner: RoutePlanner,
    readonly options: GraphQLCostOptions,
    readonly runtime: AppGraphQL,
  ) {
    const declared = declareBudgets(options).map((d) => ({
      ...d,
      // Every budget is charged the operation's requested cost, carried by its context: it
      // reads no user, so only the budget's key and rate can make it wait for one.
      options: { ...d.options, cost: keys.withoutUser(requestedCostOf) },
    }));
    this.plan =
      declared.length === 0
        ? undefined
        : planner.planOfPolicies('GraphQL operation', declared, true);
    this.gate = new Gate(planner.options, planner.events, planner.allowList);
    this.rules = this.plan?.route.enforced ?? [];
    this.maxCost = options.maxCost ?? Infinity;
    const limits: Record<string, number | undefined> = { ...DEFAULT_OPERATION_LIMITS };
    for (const name of LIMIT_OPTIONS) {
      if (options[name] !== undefined) limits[name] = options[name];
    }
    this.limits = limits as OperationLimits;
  }

  /** Whether responses carry `extensions.cost`. */
  get inResponse(): boolean {
    return this.options.costInResponse !== false;
  }

  /**
   * Before execution: the operation limits, the requested cost, then the budget charged it.
   * @returns the charge; the refusal to answer instead of executing; or undefined when the
   *   document has no such operation (an unknown `operationName`): nothing is charged and the
   *   server answers its own error, executing nothing
   */
  async charge(op: OperationRequest): Promise<Charge | OperationRefusal | undefined> {
    const picked = this.pick(op);
    if ('answer' in picked) return picked.answer;
    const { operationName, guessed, requested } = picked;
    if (requested > this.maxCost) return tooCostly(requested, this.maxCost);
    if (this.plan === undefined) return { requested, outcome: NO_LIMIT, operationName, guessed };
    const ctx = operationContext(op.contextValue, op.variables, requested);
    const outcome = await this.decide(ctx, this.plan);
    if (outcome.allowed) return { requested, outcome, operationName, guessed };
    // More than a budget holds (for this identity: an override may hold more): it can never
    // be admitted, so it is refused as too costly, not as a 429 without a wait.
    const capacities = (outcome.decision?.policies ?? []).flatMap((p, i) =>
      !p.allowed && p.retryAfterMs === Infinity
        ? [p.override ? p.limit : (this.rules[i]?.policy?.capacity ?? p.limit)]
        : [],
    );
    if (capacities.length > 0) return { ...tooCostly(requested, Math.min(...capacities)), outcome };
    const { status, message, retryAfter } = refusalFields(outcome.refusal!);
    const code = status === 503 ? 'SERVICE_UNAVAILABLE' : 'RATE_LIMITED';
    return {
      code,
      status,
      message,
      extensions: { code, cost: requested, ...(retryAfter !== undefined && { retryAfter }) },
      requested,
      outcome,
    };
  }

  /**
   * After execution: the actual cost from the result's `data`, what the operation did not use
   * given back to its budget (one store call; a failure is logged and the points stay spent),
   * and `extensions.cost`.
   * @param result `executed`: execution started (a result with `data`, even null); `errors`:
   *   the result has errors. One that never started (variables that do not coerce) is given
   *   back everything; one with errors keeps its requested cost, as a field that failed,
   *   nulling its parents, may have done its work first.
   */
  async settle(
    op: OperationRequest,
    charge: Charge,
    result: { data: unknown; executed: boolean; errors: boolean },
  ): Promise<OperationCostExtension> {
    const operationName = charge.operationName;
    const actual = !result.executed
      ? 0
      : result.errors || charge.guessed
        ? charge.requested
        : Math.min(charge.requested, this.actual({ ...op, operationName }, result.data, charge));
    const unused = charge.requested - actual;
    const { spending } = charge.outcome;
    const refunded = unused > 0 && spending && (await this.refund(spending, unused)) ? unused : 0;
    return costExtension(charge.requested, actual, charge.outcome, this.rules, refunded);
  }

  /**
   * The actual cost of what ran, rounded up; the requested cost when the response is too large
   * to walk within the step budget (nothing is given back).
   */
  private actual(op: OperationRequest, data: unknown, charge: Charge): number {
    try {
      return Math.ceil(actualCost(this.runtime, { ...op, data }, this.options));
    } catch (error) {
      if (error instanceof CostAnalysisLimitError) return charge.requested;
      throw error;
    }
  }

  /** `extensions.cost` of an operation refused before it ran. */
  refused(refusal: OperationRefusal): OperationCostExtension {
    return costExtension(refusal.requested, null, refusal.outcome ?? NO_LIMIT, this.rules, 0);
  }

  /**
   * The GraphQL error of a refusal, from the app's own `graphql`.
   * @param extensions more `extensions`, for the server (Apollo's `http`)
   */
  error(refusal: OperationRefusal, extensions: Record<string, unknown> = {}): Error {
    return new this.runtime.GraphQLError(refusal.message, {
      extensions: { ...refusal.extensions, ...extensions },
    });
  }

  /**
   * The error of a refusal thrown from a resolver's guard: as a field refusal is (see
   * `graphQLRefusal`), one Nest does not log at ERROR with a stack per refused field.
   */
  resolverError(refusal: OperationRefusal): Error {
    return Object.assign(intrinsic(refusal.message), { extensions: refusal.extensions });
  }

  private async decide(ctx: ExecutionContext, plan: RoutePlan): Promise<RequestOutcome> {
    if (this.gate.off) return NO_LIMIT;
    const { options, events } = this.planner;
    const request = graphqlTransport.request(ctx, events);
    const passes = await this.gate.passes(request, () => askSkip(options, events, ctx));
    if (!passes) return NO_LIMIT;
    const outcome = await plan.decide(ctx, identitiesOf(ctx, request, plan.name, options, events));
    graphqlTransport.setHeaders(ctx, outcome.headers, outcome);
    return outcome;
  }

  /** Gives `unused` back under every budget that spent; false when the store did not take it. */
  private async refund(spending: Spending, unused: number): Promise<boolean> {
    const refunds = spending.refunds.map(({ index, refund }) => ({
      index,
      refund: { ...refund, cost: Math.min(refund.cost, unused) },
    }));
    try {
      return (await this.planner.limiter.refund({ refunds })) > 0;
    } catch (error) {
      this.planner.events.backendError('GraphQL operation', error);
      return false;
    }
  }

  /**
   * The operation limits, then the requested cost (rounded up), of one operation.
   * @returns the cost in points; a refusal (a limit, or the analysis's step budget); undefined
   *   when the document has no such operation
   */
  private price(op: OperationRequest): number | OperationRefusal | undefined {
    try {
      const exceeded = operationLimitExceeded(this.runtime, op, this.limits);
      if (exceeded !== undefined) return limitRefusal('OPERATION_LIMIT_EXCEEDED', exceeded);
      return Math.ceil(requestedCost(this.runtime, op, this.options));
    } catch (error) {
      if (error instanceof CostAnalysisLimitError) {
        return limitRefusal('COST_ANALYSIS_LIMIT_EXCEEDED', error.exceeded);
      }
      if (error instanceof OperationNotFoundError) return undefined;
      throw error;
    }
  }

  /**
   * The operation to price and its requested cost: the one named, else the document's only
   * one. A document of several operations without a name the server told us (Mercurius over
   * WebSockets) is priced at its costliest (`guessed`: never refunded, as the actual cost of
   * another operation's data would read as nothing); one of them over a limit refuses it.
   * @returns the operation priced, or the answer instead (a refusal; undefined: no such
   *   operation)
   */
  private pick(
    op: OperationRequest,
  ):
    | { operationName?: string | null; guessed: boolean; requested: number }
    | { answer: OperationRefusal | undefined } {
    const names: string[] = [];
    if (!op.operationName) {
      for (const definition of op.document.definitions) {
        if (definition.kind !== this.runtime.Kind.OPERATION_DEFINITION) continue;
        // Several operations and one without a name is invalid: validated documents have none.
        if (definition.name !== undefined) names.push(definition.name.value);
      }
    }
    if (names.length <= 1) {
      const requested = this.price(op);
      if (typeof requested !== 'number') return { answer: requested };
      return { operationName: op.operationName, guessed: false, requested };
    }
    let costliest: { operationName: string; guessed: true; requested: number } | undefined;
    for (const name of names) {
      const requested = this.price({ ...op, operationName: name });
      if (typeof requested !== 'number') return { answer: requested };
      if (costliest === undefined || requested > costliest.requested)
        costliest = { operationName: name, guessed: true, requested };
    }
    return costliest!;
  }
}

/** Whether `charge` answered a refusal. */
export function isRefusal(
  charged: Charge | OperationRefusal | undefined,
): charged is OperationRefusal {
  return charged !== undefined && 'code' in charged;
}

/** Nest's `IntrinsicException` (NestJS 11 and later), else an `Error`. */
function intrinsic(message: string): Error {
  const Intrinsic = (common as { IntrinsicException?: new (message?: string) => Error })
    .IntrinsicException;
  return Intrinsic ? new Intrinsic(message) : new Error(message);
}
