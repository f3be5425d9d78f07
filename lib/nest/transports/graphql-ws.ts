import type { OperationRefusalCode } from '../graphql/refusals.js';
import type { GraphQLRefusalCode } from './graphql.js';

/** The refusals sent as `error` messages: a field's, and an operation's before it runs. */
const REFUSALS = new Set<string>([
  'RATE_LIMITED',
  'SERVICE_UNAVAILABLE',
  'MAX_COST_EXCEEDED',
  'OPERATION_LIMIT_EXCEEDED',
  'COST_ANALYSIS_LIMIT_EXCEEDED',
] satisfies (GraphQLRefusalCode | OperationRefusalCode)[]);

type ErrorLike = { extensions?: { code?: unknown } };

/**
 * graphql-ws server options (Apollo's `subscriptions['graphql-ws']`) with an `onOperation`
 * hook that sends a subscription refused at subscribe time (by its field's policy, or by the
 * operation cost: `maxCost`, an operation limit, the budget) as an `error` message, the
 * client's `error` callback, instead of graphql-ws's default for any error raised while
 * subscribing: a `next` message with `errors`, then `complete`. The error keeps its message
 * and `extensions` (`code`, `retryAfter`). Other results are left as they are.
 *
 * ```ts
 * subscriptions: { 'graphql-ws': rateLimitedSubscriptionsAsErrors({ onConnect }) },
 * ```
 *
 * Typed as the options given, since `@nestjs/graphql`'s type of them leaves `onOperation`
 * out (graphql-ws receives every option all the same). Replaces an `onOperation` of
 * `options`. Mercurius sends such refusals as `error` messages by itself.
 */
export function rateLimitedSubscriptionsAsErrors<T extends object = object>(
  options: T = {} as T,
): T {
  return { ...options, onOperation: refusalAsError };
}

/** The `onOperation` hook of {@link rateLimitedSubscriptionsAsErrors}. */
function refusalAsError(
  _ctx: unknown,
  _id: unknown,
  _payload: unknown,
  _args: unknown,
  result: unknown,
): AsyncIterable<never> | undefined {
  if (typeof result !== 'object' || result === null || Symbol.asyncIterator in result)
    return undefined;
  const errors = (result as { errors?: unknown }).errors;
  const refusal = Array.isArray(errors)
    ? (errors as ErrorLike[]).find((e) => REFUSALS.has(e?.extensions?.code as string))
    : undefined;
  if (refusal === undefined) return undefined;
  // graphql-ws sends what the stream throws as an `error` message: a stream that throws the
  // refusal at once is how a hook reaches that path.
  return {
    [Symbol.asyncIterator]: () => ({
      next: () => Promise.reject(refusal as Error),
      return: () => Promise.resolve({ done: true, value: undefined as never }),
    }),
  };
}
