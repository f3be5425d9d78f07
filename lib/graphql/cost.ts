/**
 * GraphQL operation cost: what an operation may cost before it runs, and what it
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
import type {
  DocumentNode,
  FieldNode,
  GraphQLObjectType,
  GraphQLSchema,
  SelectionSetNode,
} from 'graphql';
import { fieldActual } from './actual.js';
import { isExcluded } from './arguments.js';
import {
  applies,
  clamp,
  fieldInfo,
  pickOperation,
  rootType,
  step,
  variableDefaults,
  type FieldInfo,
  type OperationTypeCost,
  type Walk,
} from './walk-state.js';
import { fieldCost } from './requested.js';
import type { GraphQLRuntime } from './runtime.js';
import { directiveNames } from './weights.js';

export type { OperationTypeCost } from './walk-state.js';

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
   * Cost points of each operation type, charged per executed root field (a mutation's per
   * mutation field: a thousand aliased `sendEmail` in one operation are a thousand writes),
   * merged over the default `{ query: 0, mutation: 10, subscription: 0 }` (Apollo Router demand
   * control, and Shopify's 10 points per mutation: a write costs more than the objects it
   * returns).
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
  /**
   * `true` when the server does not tell the caller the request's variables (Mercurius's
   * `preSubscriptionExecution` hook): a variable without a default in the operation may then
   * hold anything, and a slicing argument given by one counts as `UNKNOWN_SLICE_SIZE`
   * (2^31 − 1 items), so that the cost stays an upper bound. Default `false`: `variables` are
   * all the client sent.
   */
  readonly variablesUnknown?: boolean;
}

/** Default `CostOptions.defaultListSize`, in items. */
export const DEFAULT_LIST_SIZE = 10;

/**
 * Default `CostOptions.maxAnalysisSteps`, in steps: far above what a legitimate operation takes
 * (the bench's 20-field query: 140 steps priced, 440 over its response; GraphiQL's
 * introspection query: 75 priced, about 1,800 over a small schema's answer), and about 0.1 s of
 * CPU at most (about 0.1 µs a step priced, 0.07 µs a response value).
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
 * points: an integer from `minimumCost` (default 1) to `Number.MAX_SAFE_INTEGER`. Each root
 * field costs at least 1 point (its resolver runs), plus its operation type's cost
 * (`operationTypeCost`). Fractional weights add up to a fraction that is rounded up
 * (`Math.ceil`), so that callers charge whole points and never less than the weights say. One
 * walk over the operation, linear in its size times the possible types of its abstract types:
 * a named fragment is expanded once per selection set and its cost remembered per type.
 *
 * Throws `CostAnalysisLimitError` when the walk exceeds `maxAnalysisSteps` or nests deeper than
 * `MAX_WALK_DEPTH`; `OperationNotFoundError` when the document has no operation to pick; an
 * `Error` for a root type the schema lacks (validation refuses such a document).
 */
export function requestedCost(
  runtime: GraphQLRuntime,
  input: OperationInput,
  options?: CostOptions,
): number {
  const { walk, typeCost, root, set, minimum } = prepare(runtime, input, options);
  let cost = 0;
  forEachRootField(walk, set, root, (node, info) => {
    cost += Math.max(1, fieldCost(walk, node, info)) + typeCost;
  });
  return total(cost, minimum);
}

/**
 * The actual cost of the executed operation, in cost points, from its result's `data`
 * (IBM §5.1.3): lists at the length the response holds (more than requested if a resolver
 * returned more: what ran is charged), a null value costing its field's weight and nothing
 * below it, an interface or union value at the type its `__typename` names (the most
 * expensive possible type when the operation selects no `__typename` there: only a response
 * key that the operation maps to the real `__typename` is read, never another field aliased
 * `__typename`). Each root field in `data` costs at least 1 point plus its operation type's
 * cost. An integer, rounded up and at least `minimumCost` like `requestedCost`. `data: null`
 * costs the operation type's cost of every root field (a failed mutation may have run), or
 * `minimumCost`. Linear in the size of `data` times the possible types of its abstract values.
 *
 * Throws as `requestedCost` does (`CostAnalysisLimitError` past the step budget: a response
 * of more values than `maxAnalysisSteps`).
 */
export function actualCost(
  runtime: GraphQLRuntime,
  input: OperationInput & { readonly data: unknown },
  options?: CostOptions,
): number {
  const { walk, typeCost, root, set, minimum } = prepare(runtime, input, options);
  const data = input.data;
  const object =
    typeof data === 'object' && data !== null && !Array.isArray(data)
      ? (data as Readonly<Record<string, unknown>>)
      : undefined;
  let cost = 0;
  forEachRootField(walk, set, root, (node, info) => {
    if (!object) {
      cost += typeCost;
      return;
    }
    const key = node.alias?.value ?? node.name.value;
    if (!Object.prototype.hasOwnProperty.call(object, key)) return; // not executed
    cost += Math.max(1, fieldActual(walk, node, info, object[key])) + typeCost;
  });
  return total(cost, minimum);
}

/**
 * Calls `each` for every root field the operation executes (`__typename` aside: no resolver),
 * through inline fragments and named fragments (each expanded once, as graphql-js collects
 * root fields) and leaving out what `@skip`/`@include` excludes. Iterative.
 */
function forEachRootField(
  walk: Walk,
  set: SelectionSetNode,
  root: GraphQLObjectType,
  each: (node: FieldNode, info: FieldInfo) => void,
): void {
  const { rt } = walk;
  const visited = new Set<string>();
  const pending = [set];
  for (let current = pending.pop(); current; current = pending.pop()) {
    for (const selection of current.selections) {
      step(walk);
      if (isExcluded(rt, selection.directives, walk.scope)) continue;
      if (selection.kind === rt.Kind.FIELD) {
        if (selection.name.value === '__typename') continue;
        const info = fieldInfo(walk, root, selection.name.value);
        if (info) each(selection, info);
      } else if (selection.kind === rt.Kind.INLINE_FRAGMENT) {
        const condition = selection.typeCondition?.name.value;
        if (condition === undefined || applies(walk, condition, root)) {
          pending.push(selection.selectionSet);
        }
      } else {
        const name = selection.name.value;
        const fragment = walk.fragments.get(name);
        if (!fragment || visited.has(name)) continue;
        visited.add(name);
        if (applies(walk, fragment.typeCondition.name.value, root)) {
          pending.push(fragment.selectionSet);
        }
      }
    }
  }
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
  const steps = options?.maxAnalysisSteps;
  const walk: Walk = {
    rt: runtime,
    introspection: options?.countIntrospection !== false,
    schema: input.schema,
    scope: {
      values: input.variables ?? {},
      defaults: variableDefaults(operation),
      unknown: input.variablesUnknown === true,
    },
    fragments,
    defaultListSize:
      listSize !== undefined && Number.isInteger(listSize) && listSize >= 0
        ? listSize
        : DEFAULT_LIST_SIZE,
    names: directiveNames(runtime, input.schema),
    active: new Set(),
    steps: 0,
    maxSteps:
      steps !== undefined && Number.isInteger(steps) && steps > 0
        ? steps
        : DEFAULT_MAX_ANALYSIS_STEPS,
    depth: 0,
    memo: undefined,
    formMemo: undefined,
    actualMemo: undefined,
    typenameKeys: undefined,
  };
  const min = options?.minimumCost;
  const minimum =
    typeof min === 'number' && Number.isFinite(min) && min >= 0 ? min : DEFAULT_MINIMUM_COST;
  const kind = String(operation.operation) as keyof OperationTypeCost;
  const typeCost = options?.operationTypeCost?.[kind] ?? DEFAULT_OPERATION_TYPE_COST[kind] ?? 0;
  return { walk, typeCost, root, set: operation.selectionSet, minimum };
}
