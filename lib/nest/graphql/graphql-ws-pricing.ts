import type { ExecutionArgs, ExecutionResult, GraphQLError } from 'graphql';
import { markCharged, markPriced } from './charged.js';
import { isRefusal, type OperationCosts, type OperationRequest } from './operation-costs.js';

type Obj = Record<string, unknown>;
type Execute = (args: ExecutionArgs) => unknown;

function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null;
}

/**
 * graphql-ws server options (Apollo's `subscriptions['graphql-ws']`, which Nest's
 * `GqlSubscriptionService` hands to graphql-ws's `useServer`) under which every operation is
 * priced whole, once graphql-ws has parsed and validated it and before anything of it runs:
 *
 * - a query or mutation: the operation limits, `maxCost` and the budget, as over HTTP; a
 *   refusal is the result (`errors`, `extensions.cost`), and runs nothing, introspection
 *   included; after it ran, the budget gets back what it did not use;
 * - a subscription: priced once, when it starts (its events are not charged, and nothing is
 *   given back); a refusal is the result of the subscribe (`rateLimitedSubscriptionsAsErrors`
 *   sends it as an `error` message).
 *
 * The options' own `execute` and `subscribe` (else `subscriptions.execute`/`subscribe`, else
 * graphql-js's) run the operation; their `onSubscribe` runs after the token limit.
 */
export function pricedGraphQLWs(
  costs: OperationCosts,
  subscriptions: Obj,
  graphqlWs: Obj,
  maxTokens: number,
): Obj {
  const { runtime } = costs;
  const execute = (graphqlWs.execute ?? subscriptions.execute ?? runtime.execute) as Execute;
  const subscribe = (graphqlWs.subscribe ??
    subscriptions.subscribe ??
    runtime.subscribe) as Execute;
  const onSubscribe = graphqlWs.onSubscribe as ((...args: unknown[]) => unknown) | undefined;
  return {
    ...graphqlWs,
    execute: priced(costs, execute, true),
    subscribe: priced(costs, subscribe, false),
    ...(Number.isFinite(maxTokens) && {
      // graphql-ws parses without a token limit: a document over it is refused first.
      onSubscribe: (...args: unknown[]) => {
        const tooLong = overTokens(costs, payloadOf(args), maxTokens);
        if (tooLong !== undefined) return [tooLong];
        return onSubscribe?.(...args);
      },
    }),
  };
}

/** `execute` or `subscribe`, priced before it runs (`settles`: refunded after it). */
function priced(costs: OperationCosts, run: Execute, settles: boolean): Execute {
  return async (args: ExecutionArgs) => {
    markPriced(args.document);
    markCharged(args.contextValue);
    const op: OperationRequest = {
      schema: args.schema,
      document: args.document,
      operationName: args.operationName,
      variables: args.variableValues as OperationRequest['variables'],
      contextValue: args.contextValue,
    };
    const charged = await costs.charge(op);
    // No such operation: graphql-js refuses it, running nothing.
    if (charged === undefined) return run(args);
    if (isRefusal(charged)) {
      const refused: ExecutionResult = { errors: [costs.error(charged) as GraphQLError] };
      return costs.inResponse
        ? { ...refused, extensions: { cost: costs.refused(charged) } }
        : refused;
    }
    const result = await run(args);
    // A stream (a subscription, or incremental delivery) has no single result to settle.
    if (!settles || !isObject(result) || Symbol.asyncIterator in result) return result;
    const cost = await costs.settle(op, charged, {
      data: result.data,
      executed: 'data' in result,
      errors: result.errors !== undefined,
    });
    if (!costs.inResponse) return result;
    return { ...result, extensions: { ...(result.extensions as Obj | undefined), cost } };
  };
}

/** The `subscribe` message's payload: graphql-ws 6 `(ctx, id, payload)`, 5 `(ctx, message)`. */
function payloadOf(args: unknown[]): unknown {
  if (isObject(args[2])) return args[2];
  return isObject(args[1]) ? args[1].payload : undefined;
}

/** graphql-js's own syntax error for a query of more than `maxTokens` tokens. */
function overTokens(
  costs: OperationCosts,
  payload: unknown,
  maxTokens: number,
): GraphQLError | undefined {
  const query = isObject(payload) ? payload.query : undefined;
  if (typeof query !== 'string') return undefined;
  try {
    costs.runtime.parse(query, { maxTokens });
    return undefined;
  } catch (error) {
    // Any other syntax error is graphql-ws's to answer, as it parses the query again.
    return /tokens/i.test((error as Error).message) ? (error as GraphQLError) : undefined;
  }
}
