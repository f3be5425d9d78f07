/**
 * GraphQL operation cost (DESIGN §14): what an operation may cost before it runs, and what it
 * did cost after, from the IBM GraphQL Cost Directive weights (`@cost`, `@listSize`, or their
 * code-first twins) with defaults that keep an unannotated schema safe. Pure: no Nest, no
 * Redis, and the app's own `graphql` module is passed in as `runtime`.
 *
 * The model is Apollo Router's "demand control" reading of the IBM spec: an operation costs
 * its type's base cost plus its fields; a field costs its list size times (its weight plus
 * its selections) plus its arguments' weights. The IBM spec's own prose counts a list field's
 * weight once per resolver call instead (`users(max: 5) { age @cost(2) }` is 11 there, 15 here):
 * counting every returned object is the upper bound GitHub and Shopify charge for.
 */
import type { DocumentNode, GraphQLSchema } from 'graphql';
import { selectionsActual } from './actual.js';
import {
  clamp,
  pickOperation,
  rootType,
  variableDefaults,
  type OperationTypeCost,
  type Walk,
} from './context.js';
import { selectionsCost } from './requested.js';
import type { GraphQLRuntime } from './runtime.js';

export type { OperationTypeCost } from './context.js';

/** Tuning of the analysis; every field is optional. */
export interface CostOptions {
  /**
   * Items assumed in a list whose size neither a slicing argument nor `@listSize(assumedSize)`
   * gives: default 10, as Apollo Router's documented `list_size` example (the IBM spec has no
   * default: it asks for `@listSize` on every list). Set it to the largest page your
   * resolvers return unasked. A non-negative integer.
   */
  readonly defaultListSize?: number;
  /**
   * Base cost points of each operation type, merged over the default
   * `{ query: 0, mutation: 10, subscription: 0 }` (Apollo Router demand control, and
   * Shopify's 10 points per mutation: a write costs more than the objects it returns).
   */
  readonly operationTypeCost?: Partial<OperationTypeCost>;
  /**
   * Whether the introspection meta-fields `__schema` and `__type` count, with the same
   * defaults as any field (each `__Type`, `__Field`... object 1, lists `defaultListSize`):
   * default `true`, since they run resolvers and build lists as long as the schema is wide.
   * `false` makes them free (e.g. introspection is disabled in production anyway and dev tools
   * must not be refused). `__typename` is always free: no resolver runs for it.
   */
  readonly countIntrospection?: boolean;
  /**
   * The least an operation costs, in cost points, applied to the requested and the actual
   * cost alike (`max(minimumCost, cost)`): default 1, as GitHub's GraphQL API charges every
   * call at least 1 point, a single request (GitHub Docs, "Rate limits and query limits for the
   * GraphQL API", https://docs.github.com/en/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api).
   * So an operation that selects only scalars, or only `{ __typename }`, is never free and a
   * budget can refuse it. `0` gives the raw cost. A non-negative finite number (rounded up);
   * anything else counts as the default.
   */
  readonly minimumCost?: number;
  /**
   * The most steps one call of `requestedCost` or `actualCost` may take (a step: a selection
   * visited, or a value of the response read), default `DEFAULT_MAX_ANALYSIS_STEPS`. Past it the
   * call throws `CostAnalysisLimitError` (`maxAnalysisSteps`) instead of computing on: the
   * analysis never costs the server more than a bounded amount, whatever the document. A
   * positive integer; anything else counts as the default.
   */
  readonly maxAnalysisSteps?: number;
}

/** One operation to analyse, as the server received it. */
export interface OperationInput {
  /** The schema the operation runs against (built by the same `graphql` as `runtime`). */
  readonly schema: GraphQLSchema;
  /** The parsed, validated document. */
  readonly document: DocumentNode;
  /** Which operation of the document runs; required when it holds several. */
  readonly operationName?: string | null;
  /** The request's raw variables (not yet coerced). */
  readonly variables?: Readonly<Record<string, unknown>> | null;
}

/** Default `CostOptions.defaultListSize`, in items. */
export const DEFAULT_LIST_SIZE = 10;

/**
 * Default `CostOptions.maxAnalysisSteps`, in steps: far above what a legitimate document takes
 * (the 20-field bench query takes about 200, the GraphiQL introspection query about 300;
 * a response of 100,000 values as many), and about 100 ms of CPU at worst.
 */
export const DEFAULT_MAX_ANALYSIS_STEPS = 1_000_000;

/** Default `CostOptions.minimumCost`, in cost points. */
export const DEFAULT_MINIMUM_COST = 1;

/** Default `CostOptions.operationTypeCost`, in cost points. */
export const DEFAULT_OPERATION_TYPE_COST: OperationTypeCost = Object.freeze({
  query: 0,
  mutation: 10,
  subscription: 0,
});

/**
 * The requested (worst-case, upper-bound) cost of the operation, before execution, in cost
 * points: an integer from `minimumCost` (default 1) to `Number.MAX_SAFE_INTEGER`. Fractional
 * weights add up to a fraction that is rounded up (`Math.ceil`), so that callers charge whole
 * points and never less than the weights say. One walk over the operation, linear in its size
 * times the possible types of its abstract types (a selection set is walked once per object
 * type and handed-down list size it meets).
 *
 * Throws an `Error` only for a document validation refuses: no operation, an unknown
 * `operationName`, several operations without one, a root type the schema lacks.
 */
export function requestedCost(
  runtime: GraphQLRuntime,
  input: OperationInput,
  options?: CostOptions,
): number {
  const { walk, base, root, set, minimum } = prepare(runtime, input, options);
  return total(base + selectionsCost(walk, set, root, undefined), minimum);
}

/**
 * The actual cost of the executed operation, in cost points, from its result's `data`
 * (IBM §5.1.3): lists at their returned length, a null value costing its field's weight and
 * nothing below it, an interface or union value at the type its `__typename` names (the most
 * expensive possible type when the operation selects no `__typename` there: only a response
 * key that the operation maps to the real `__typename` is read, never another field aliased
 * `__typename`). An integer, rounded up and at least `minimumCost` like `requestedCost`, and
 * never more than `requestedCost` for the same input. `data: null` (nothing ran) costs the
 * operation's base cost (or `minimumCost`). Linear in the size of `data` times the possible
 * types of its abstract values.
 */
export function actualCost(
  runtime: GraphQLRuntime,
  input: OperationInput & { readonly data: unknown },
  options?: CostOptions,
): number {
  const { walk, base, root, set, minimum } = prepare(runtime, input, options);
  const data = input.data;
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return total(base, minimum);
  }
  const cost = selectionsActual(walk, set, root, data as Record<string, unknown>, undefined);
  return total(base + cost, minimum);
}

/**
 * A raw total as returned: at least `minimum`, clamped to `[0, MAX_SAFE_INTEGER]`, and rounded
 * up to an integer. A sum of fractional weights a float error above an integer (`0.7 + 2.2 +
 * 0.1` is 3.0000000000000004) is that integer, not the next one.
 */
function total(raw: number, minimum: number): number {
  const cost = clamp(Math.max(clamp(raw), minimum));
  const nearest = Math.round(cost);
  return Math.abs(cost - nearest) <= 1e-9 * Math.max(1, cost) ? nearest : Math.ceil(cost);
}

function prepare(runtime: GraphQLRuntime, input: OperationInput, options: CostOptions | undefined) {
  const { operation, fragments } = pickOperation(runtime, input.document, input.operationName);
  const root = rootType(input.schema, operation);
  const listSize = options?.defaultListSize;
  const walk: Walk = {
    rt: runtime,
    introspection: options?.countIntrospection !== false,
    schema: input.schema,
    scope: { values: input.variables ?? {}, defaults: variableDefaults(operation) },
    fragments,
    defaultListSize:
      listSize !== undefined && Number.isInteger(listSize) && listSize >= 0
        ? listSize
        : DEFAULT_LIST_SIZE,
    active: new Set(),
    memo: undefined,
    actualMemo: undefined,
    typenameKeys: undefined,
  };
  const min = options?.minimumCost;
  const minimum =
    typeof min === 'number' && Number.isFinite(min) && min >= 0 ? min : DEFAULT_MINIMUM_COST;
  const kind = String(operation.operation) as keyof OperationTypeCost;
  const base = options?.operationTypeCost?.[kind] ?? DEFAULT_OPERATION_TYPE_COST[kind] ?? 0;
  return { walk, base, root, set: operation.selectionSet, minimum };
}
