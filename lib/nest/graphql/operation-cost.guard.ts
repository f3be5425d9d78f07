import {
  Inject,
  Injectable,
  Optional,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import type { DocumentNode, GraphQLResolveInfo } from 'graphql';
import { isCharged, isPriced } from './charged.js';
import { isRefusal, type OperationCosts, type OperationRefusal } from './operation-costs.js';
import { RATE_LIMIT_GUARD } from '../pipeline/stages/after-route-guards.js';
import { OPERATION_COSTS } from './tokens.js';

/** One charge per execution: graphql-js builds `variableValues` afresh for each. */
const executions = new WeakMap<object, Promise<OperationRefusal | undefined>>();

/**
 * GraphQL operation cost for the operations no server hook sees: an execution of a context the
 * Apollo plugin or the Mercurius hooks did not mark, of a document the graphql-ws pricing did
 * not mark (an app's own `execute`, a graphql-ws server Nest's driver did not start). A last
 * resort: introspection and `__typename`, which no Nest resolver serves, run before it and
 * unpriced if they are all the operation selects. Priced at its first root field, from the document graphql-js hands every
 * resolver, before that resolver runs: `maxCost` and the budget apply, and a refusal is the
 * error of every root field. Not refunded: there is no hook after such an execution.
 * Subscriptions are left to the field-level policies (a subscription counts when it starts).
 * A global guard of the module, registered when it has a `graphql` option (always with
 * `forRootAsync`); every other call passes at once.
 */
@Injectable()
export class OperationCostGuard implements CanActivate {
  constructor(
    @Optional() @Inject(OPERATION_COSTS) private readonly costs?: OperationCosts | null,
  ) {}

  canActivate(ctx: ExecutionContext): boolean | Promise<boolean> {
    const costs = this.costs;
    if (!costs || ctx.getType<string>() !== 'graphql') return true;
    const info = ctx.getArgByIndex<GraphQLResolveInfo | undefined>(3);
    const contextValue: unknown = ctx.getArgByIndex(2);
    if (
      typeof info !== 'object' ||
      info === null ||
      info.path?.prev !== undefined ||
      isCharged(contextValue) ||
      isPriced(info.operation) ||
      info.operation?.operation === 'subscription' ||
      typeof info.variableValues !== 'object' ||
      info.variableValues === null
    ) {
      return true;
    }
    let charged = executions.get(info.variableValues);
    if (charged === undefined) {
      charged = charge(costs, info, contextValue);
      executions.set(info.variableValues, charged);
    }
    return charged.then((refusal) => {
      if (refusal) throw costs.resolverError(refusal);
      return true;
    });
  }
}

// One of ours: never taken for a guard of the app's that authenticates (see after-route-guards.ts).
Object.defineProperty(OperationCostGuard.prototype, RATE_LIMIT_GUARD, { value: true });

async function charge(
  costs: OperationCosts,
  info: GraphQLResolveInfo,
  contextValue: unknown,
): Promise<OperationRefusal | undefined> {
  const document: DocumentNode = {
    kind: 'Document' as DocumentNode['kind'],
    definitions: [info.operation, ...Object.values(info.fragments)],
  };
  // graphql-js 17 holds `{ sources, coerced }` here, 16 the coerced values themselves.
  const values = info.variableValues as unknown as { coerced?: Record<string, unknown> };
  const charged = await costs.charge({
    schema: info.schema,
    document,
    operationName: info.operation.name?.value,
    variables: values.coerced ?? (info.variableValues as Record<string, unknown>),
    contextValue,
  });
  return isRefusal(charged) ? charged : undefined;
}
