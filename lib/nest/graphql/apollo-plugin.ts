import { Inject, Injectable, Optional } from '@nestjs/common';
import type { OperationCostExtension } from './cost-extension.js';
import { markCharged } from './charged.js';
import { OPERATION_COSTS } from './tokens.js';
import {
  isRefusal,
  type Charge,
  type OperationCosts,
  type OperationRefusal,
  type OperationRequest,
} from './operation-costs.js';

/**
 * `@nestjs/apollo`'s marker of Apollo Server plugins (its `@Plugin()`, `PLUGIN_METADATA`),
 * set here by hand so that this file never loads `@nestjs/apollo`, an optional peer: the
 * driver registers every provider of the app that carries it.
 */
const APOLLO_PLUGIN = 'graphql:plugin';

/** The parts of Apollo Server's request context this plugin reads (Apollo Server 4 and 5). */
interface ApolloRequestContext {
  readonly schema: OperationRequest['schema'];
  readonly document?: OperationRequest['document'];
  readonly operationName?: string | null;
  readonly operation?: { readonly operation: string };
  readonly request: {
    readonly operationName?: string;
    readonly variables?: Record<string, unknown>;
  };
  readonly contextValue: unknown;
  readonly response: {
    body?:
      | { kind: 'single'; singleResult: { data?: unknown; errors?: unknown; extensions?: object } }
      | { kind: 'incremental' };
  };
}

/** What Apollo calls per operation. */
interface ApolloListener {
  didResolveOperation(rc: ApolloRequestContext): Promise<void>;
  willSendResponse(rc: ApolloRequestContext): Promise<void>;
}

/**
 * GraphQL operation cost on Apollo Server, registered by `RateLimitModule` when
 * the module has a `graphql` option: once an operation is validated and before any resolver
 * runs, its requested cost is checked against `maxCost` and charged to the budget (a refusal
 * is the response: 400, 429 or 503 with the error and the rate-limit headers); once it has
 * run, the budget gets back what it did not use, and `extensions.cost` is added. Each
 * operation of a batched request is its own. Operations over graphql-ws do not pass here
 * (Nest's subscription server runs without Apollo's plugins): `graphql-ws-pricing.ts` prices
 * them.
 */
@Injectable()
export class ApolloOperationCostPlugin {
  constructor(
    @Optional() @Inject(OPERATION_COSTS) private readonly costs?: OperationCosts | null,
  ) {}

  requestDidStart(): Promise<ApolloListener | undefined> {
    const costs = this.costs;
    if (!costs) return Promise.resolve(undefined);
    let op: OperationRequest | undefined;
    let charge: Charge | undefined;
    let refused: OperationCostExtension | undefined;
    return Promise.resolve({
      async didResolveOperation(rc) {
        // No operation by that name, or none at all: Apollo answers its own 400, running nothing.
        if (rc.document === undefined || rc.operation === undefined) return;
        if (rc.operation.operation === 'subscription') return;
        markCharged(rc.contextValue);
        op = {
          schema: rc.schema,
          document: rc.document,
          operationName: rc.operationName ?? rc.request.operationName,
          variables: rc.request.variables,
          contextValue: rc.contextValue,
        };
        const charged = await costs.charge(op);
        if (!isRefusal(charged)) {
          charge = charged;
          if (charged === undefined) op = undefined;
          return;
        }
        refused = costs.refused(charged);
        throw apolloError(costs, charged);
      },
      async willSendResponse(rc) {
        const body = rc.response.body;
        if (body?.kind !== 'single' || op === undefined) return;
        const result = body.singleResult;
        const cost = charge
          ? await costs.settle(op, charge, {
              data: result.data,
              // Variables that do not coerce end the request before execution, without `data`.
              executed: 'data' in result,
              errors: result.errors !== undefined,
            })
          : refused;
        if (cost !== undefined && costs.inResponse) {
          result.extensions = { ...result.extensions, cost };
        }
      },
    } satisfies ApolloListener);
  }
}
Reflect.defineMetadata(APOLLO_PLUGIN, true, ApolloOperationCostPlugin);

/** The refusal as Apollo answers it: its status from `extensions.http`, which Apollo removes. */
function apolloError(costs: OperationCosts, refusal: OperationRefusal): Error {
  return costs.error(refusal, { http: { status: refusal.status } });
}
