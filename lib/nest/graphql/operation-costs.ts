import type { ExecutionContext } from '@nestjs/common';
import type { DocumentNode, GraphQLSchema } from 'graphql';
import type { Spending } from '../../core/limiter.js';
import type { PolicyDecision } from '../../core/decision.js';
import { actualCost, requestedCost } from '../../graphql/cost.js';
import type { AppGraphQL } from './load-graphql.js';
import type { RoutePlan } from '../pipeline/call.js';
import { Gate } from '../pipeline/gate.js';
import { identitiesOf } from '../pipeline/identify.js';
import { NO_LIMIT, type RequestOutcome } from '../pipeline/outcome.js';
import type { RoutePlanner } from '../plan/planner.js';
import { graphqlTransport } from '../transports/graphql.js';
import { refusalFields } from '../transports/refusal.js';
import { declareBudgets, type GraphQLCostOptions } from './options.js';
import { operationContext, requestedCostOf } from './operation-context.js';

/** One operation as a GraphQL server hands it over, validated, before execution. */
export interface OperationRequest {
  readonly schema: GraphQLSchema;
  readonly document: DocumentNode;
  readonly operationName?: string | null;
  /** Raw, as the request sent them. */
  readonly variables?: Readonly<Record<string, unknown>> | null;
  /** The context resolvers get: the HTTP request is read from it, as for a resolver. */
  readonly contextValue: unknown;
}

/** What was charged for one operation, before it ran. */
export interface Charge {
  /** The operation's requested cost, in points. */
  readonly requested: number;
  /** The budget's decision (`NO_LIMIT` without a budget, skipped, or failed open). */
  readonly outcome: RequestOutcome;
}

/**
 * `extensions.cost` of a response, with Shopify's field names. Points; `restoreRate` in
 * points per second.
 */
export interface OperationCostExtension {
  requestedQueryCost: number;
  /** Null when the operation did not run (refused before execution). */
  actualQueryCost: number | null;
  /** The most restrictive budget after this operation's refund; absent without a budget's answer. */
  throttleStatus?: { maximumAvailable: number; currentlyAvailable: number; restoreRate: number };
}

/** The error an operation is refused with, before execution. */
export interface OperationRefusal {
  readonly code: 'MAX_COST_EXCEEDED' | 'RATE_LIMITED' | 'SERVICE_UNAVAILABLE';
  /** HTTP status: 400 over `maxCost`, 429 over the budget, 503 when a fail-closed budget's store is down. */
  readonly status: 400 | 429 | 503;
  readonly message: string;
  /** `extensions` of the GraphQL error: `code`, `cost`, `maxCost` or `retryAfter` (seconds). */
  readonly extensions: Record<string, unknown>;
  /** The operation's requested cost, in points. */
  readonly requested: number;
  /** The budget's decision, when a budget refused. */
  readonly outcome?: RequestOutcome;
}

/**
 * GraphQL operation cost (DESIGN §14), for any server: `charge` before execution (requested
 * cost, `maxCost`, the points budget, all-or-nothing, through the same stages as a route),
 * `settle` after it (actual cost, the refund of what was not used, `extensions.cost`). The
 * Apollo plugin and the Mercurius hooks (`apollo-plugin.ts`, `mercurius-hooks.ts`) call them.
 */
export class OperationCosts {
  private readonly plan: RoutePlan | undefined;
  private readonly gate: Gate;

  /** @throws {RateLimitConfigError} for an invalid budget */
  constructor(
    private readonly planner: RoutePlanner,
    private readonly options: GraphQLCostOptions,
    private readonly runtime: AppGraphQL,
  ) {
    const declared = declareBudgets(options).map((d) => ({
      ...d,
      // Every budget is charged the operation's requested cost, carried by its context.
      options: { ...d.options, cost: requestedCostOf },
    }));
    this.plan =
      declared.length === 0
        ? undefined
        : planner.planOfPolicies('GraphQL operation', declared, true);
    this.gate = new Gate(planner.options, planner.events, planner.allowList);
  }

  /** Whether responses carry `extensions.cost`. */
  get inResponse(): boolean {
    return this.options.costInResponse !== false;
  }

  /**
   * Before execution: the requested cost, then the budget charged it.
   * @returns the charge, or the refusal to answer instead of executing
   */
  async charge(op: OperationRequest): Promise<Charge | OperationRefusal> {
    const requested = requestedCost(this.runtime, op, this.options);
    const { maxCost } = this.options;
    if (maxCost !== undefined && requested > maxCost) {
      return {
        code: 'MAX_COST_EXCEEDED',
        status: 400,
        message: `Query cost ${requested} exceeds the maximum cost ${maxCost}`,
        extensions: { code: 'MAX_COST_EXCEEDED', cost: requested, maxCost },
        requested,
      };
    }
    if (this.plan === undefined) return { requested, outcome: NO_LIMIT };
    const ctx = operationContext(op.contextValue, op.variables, requested);
    const outcome = await this.decide(ctx, this.plan);
    if (outcome.allowed) return { requested, outcome };
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
   * and `extensions.cost`. A result with errors is charged its requested cost: a field that
   * failed, nulling its parents, may have done its work first.
   */
  async settle(
    op: OperationRequest,
    charge: Charge,
    data: unknown,
    errors: boolean,
  ): Promise<OperationCostExtension> {
    const actual = errors
      ? charge.requested
      : Math.min(charge.requested, actualCost(this.runtime, { ...op, data }, this.options));
    const unused = charge.requested - actual;
    const { spending } = charge.outcome;
    if (unused > 0 && spending) await this.refund(spending, unused);
    return this.extension(charge, actual, unused);
  }

  /** `extensions.cost` of an operation refused before it ran. */
  refused(refusal: OperationRefusal): OperationCostExtension {
    return this.extension(
      { requested: refusal.requested, outcome: refusal.outcome ?? NO_LIMIT },
      null,
      0,
    );
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

  private async decide(ctx: ExecutionContext, plan: RoutePlan): Promise<RequestOutcome> {
    if (this.gate.off) return NO_LIMIT;
    const { options, events } = this.planner;
    const request = graphqlTransport.request(ctx, events);
    const skip = options.skip;
    const passes = await this.gate.passes(request, () => {
      if (!skip) return false;
      try {
        return Promise.resolve(skip(ctx)).then(
          (skipped) => skipped === true,
          (error: unknown) => (events.configError('skip', error), false),
        );
      } catch (error) {
        events.configError('skip', error);
        return false;
      }
    });
    if (!passes) return NO_LIMIT;
    const outcome = await plan.decide(
      ctx,
      identitiesOf(ctx, request, plan.name, options, events),
      undefined,
    );
    graphqlTransport.setHeaders(ctx, outcome.headers, outcome);
    return outcome;
  }

  private async refund(spending: Spending, unused: number): Promise<void> {
    const refunds = spending.refunds.map(({ index, refund }) => ({
      index,
      refund: { ...refund, cost: Math.min(refund.cost, unused) },
    }));
    try {
      await this.planner.limiter.refund({ refunds });
    } catch (error) {
      this.planner.events.backendError('GraphQL operation', error);
    }
  }

  private extension(charge: Charge, actual: number | null, unused: number): OperationCostExtension {
    const cost: OperationCostExtension = {
      requestedQueryCost: charge.requested,
      actualQueryCost: actual,
    };
    const decided = charge.outcome.decision?.policies;
    if (decided === undefined || this.plan === undefined) return cost;
    const rules = this.plan.route.enforced;
    let tightest: { p: PolicyDecision; capacity: number; rate: number } | undefined;
    decided.forEach((p, i) => {
      const policy = rules[i]?.policy;
      if (policy === undefined || p.exempt) return;
      const capacity = p.override ? p.limit : policy.capacity;
      const periodMs = p.override?.periodMs ?? policy.periodMs;
      const available = Math.min(capacity, p.remaining + (p.allowed ? unused : 0));
      if (tightest === undefined || available < tightest.p.remaining) {
        tightest = {
          p: { ...p, remaining: available },
          capacity,
          rate: (p.limit * 1000) / periodMs,
        };
      }
    });
    if (tightest === undefined) return cost;
    const { p, capacity, rate } = tightest as { p: PolicyDecision; capacity: number; rate: number };
    cost.throttleStatus = {
      maximumAvailable: capacity,
      currentlyAvailable: p.remaining,
      restoreRate: Math.round(rate * 1000) / 1000,
    };
    return cost;
  }
}

/** Whether `charge` answered a refusal. */
export function isRefusal(charged: Charge | OperationRefusal): charged is OperationRefusal {
  return 'code' in charged;
}
