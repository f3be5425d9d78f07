/**
 * What an operation's arguments and directives say to the cost analysis: the size a slicing
 * argument asks for, whether `@include`/`@skip` leave a selection out, and the weight of the
 * arguments given. Values come from the document's literals, else the request's raw
 * variables, else the variable's default in the operation.
 */
import type {
  ArgumentNode,
  ConstValueNode,
  DirectiveNode,
  GraphQLArgument,
  GraphQLDirective,
  GraphQLField,
  GraphQLInputType,
  GraphQLSchema,
  ValueNode,
} from 'graphql';
import type { GraphQLRuntime } from './runtime.js';
import {
  declaredWeight,
  directiveNames,
  type DirectiveNames,
  type ListSizeInfo,
} from './weights.js';

/** The variables of one operation: the raw request values, and the operation's defaults. */
export interface VariableScope {
  readonly values: Readonly<Record<string, unknown>>;
  readonly defaults: ReadonlyMap<string, ConstValueNode>;
  /** Whether `values` is not what the client sent but unknown (`OperationInput.variablesUnknown`). */
  readonly unknown?: boolean;
}

/**
 * The size a slicing argument counts when it is a variable whose value the analysis cannot
 * know (`OperationInput.variablesUnknown`) and the operation gives no default: the largest
 * GraphQL `Int` (2^31 − 1), the most a client could ask for.
 */
export const UNKNOWN_SLICE_SIZE = 2_147_483_647;

const NO_KEYS: readonly string[] = [];

/** Marks a value that was not given at all (as opposed to an explicit `null`). */
const ABSENT: unique symbol = Symbol('absent');
/** Marks a variable that may have been sent, with a value the analysis was not told. */
const UNKNOWN: unique symbol = Symbol('unknown');
type Resolved = unknown | typeof ABSENT | typeof UNKNOWN;

// Raw variables are the client's JSON, not yet coerced: a recursive input type could nest
// them deeper than the stack allows. Nothing legitimate comes close.
const MAX_INPUT_DEPTH = 64;

/**
 * The list size the field's slicing arguments ask for, or `undefined` when none is given
 * (nor defaulted in the schema, IBM §8.2). Several given: the largest (IBM §8.2). A slicing
 * argument may be a path into an input object (`"input.pagination.first"`, Apollo Router's
 * dot paths), read from literals, variables and defaults alike (the argument's, then each input
 * field's). A list value counts its length (`itemsByIds(ids: [...])` with `slicingArguments:
 * ["ids"]`). Any other value that is not a non-negative integer (null, -1, 2.5, "10") counts as
 * `fallback`: it must never make a field cheaper than the size the server falls back to. A
 * variable the analysis was not told (`scope.unknown`) and without a default counts as
 * `UNKNOWN_SLICE_SIZE`.
 *
 * `requireOneSlicingArgument` (IBM §8.4) lets an analysis refuse a query; this one never
 * throws for a valid document, and the largest size (or `fallback`) is already the upper
 * bound, so it does not change the cost.
 */
export function sliceSize(
  rt: GraphQLRuntime,
  listSize: ListSizeInfo,
  node: { readonly arguments?: readonly ArgumentNode[] },
  field: GraphQLField<unknown, unknown>,
  scope: VariableScope,
  fallback: number,
): number | undefined {
  let size: number | undefined;
  for (const path of listSize.slicingArguments) {
    const dot = path.indexOf('.');
    const name = dot < 0 ? path : path.slice(0, dot);
    const keys = dot < 0 ? NO_KEYS : path.slice(dot + 1).split('.');
    const given = node.arguments?.find((a) => a.name.value === name);
    const def = field.args.find((a) => a.name === name);
    let value: Resolved = given ? resolve(rt, given.value, scope, 0) : ABSENT;
    if (value === ABSENT) value = def?.defaultValue === undefined ? ABSENT : def.defaultValue;
    let type: GraphQLInputType | undefined = def?.type;
    for (const key of keys) {
      if (value === ABSENT || value === UNKNOWN || value === null) break;
      const object = type && rt.getNullableType(type);
      const inputField =
        object && rt.isInputObjectType(object) ? object.getFields()[key] : undefined;
      type = inputField?.type;
      value =
        typeof value === 'object' &&
        !Array.isArray(value) &&
        Object.prototype.hasOwnProperty.call(value, key)
          ? (value as Record<string, unknown>)[key]
          : inputField?.defaultValue !== undefined
            ? inputField.defaultValue
            : ABSENT;
    }
    if (value === ABSENT) continue;
    const n = Array.isArray(value)
      ? value.length
      : value === UNKNOWN
        ? UNKNOWN_SLICE_SIZE
        : typeof value === 'number' && Number.isInteger(value) && value >= 0
          ? value
          : fallback;
    size = size === undefined ? n : Math.max(size, n);
  }
  return size;
}

/**
 * Whether `@skip(if: true)` or `@include(if: false)` leaves the selection out of execution.
 * A condition that cannot be read (a variable neither sent nor defaulted) keeps it in: an
 * upper bound errs towards counting.
 */
export function isExcluded(
  rt: GraphQLRuntime,
  directives: readonly DirectiveNode[] | undefined,
  scope: VariableScope,
): boolean {
  if (!directives || directives.length === 0) return false;
  for (const directive of directives) {
    const name = directive.name.value;
    if (name !== 'skip' && name !== 'include') continue;
    const arg = directive.arguments?.find((a) => a.name.value === 'if');
    const value = arg ? resolve(rt, arg.value, scope, 0) : ABSENT;
    if (name === 'skip' && value === true) return true;
    if (name === 'include' && value === false) return true;
  }
  return false;
}

/**
 * The weight of the arguments given to one field (cost points, may be negative), IBM
 * §5.3.2.2: each given argument adds its `@cost` weight once (0 by default), and each input
 * object in it adds 1 (IBM §7.1, composite input types) or its argument's `@cost`, plus the
 * weights of the input fields it sets. An argument set to `null`, or to a variable that was
 * not sent and has no default, adds nothing.
 */
export function argumentsCost(
  rt: GraphQLRuntime,
  nodes: readonly ArgumentNode[] | undefined,
  args: ReadonlyMap<string, GraphQLArgument>,
  scope: VariableScope,
  names: DirectiveNames,
): number {
  if (!nodes || nodes.length === 0) return 0;
  let cost = 0;
  for (const node of nodes) {
    const def = args.get(node.name.value);
    if (!def) continue;
    const weight = declaredWeight(rt, def, names);
    // The common case, a plain scalar argument without @cost, costs nothing: skip reading it.
    if (weight === undefined && rt.isLeafType(rt.getNamedType(def.type))) continue;
    const value = resolve(rt, node.value, scope, 0);
    if (value !== ABSENT) cost += inputCost(rt, value, def.type, weight, 0, names);
  }
  return cost;
}

const directiveArgs = new WeakMap<GraphQLDirective, ReadonlyMap<string, GraphQLArgument>>();

/**
 * The weight of the arguments given to the directives on one field (IBM §5.3.2.2: a field
 * adds the cost of its directives, e.g. `@approx(tolerance:)` with a weighted argument).
 * `@skip` and `@include` only decide whether the field counts at all.
 */
export function directivesCost(
  rt: GraphQLRuntime,
  schema: GraphQLSchema,
  directives: readonly DirectiveNode[] | undefined,
  scope: VariableScope,
): number {
  if (!directives || directives.length === 0) return 0;
  let cost = 0;
  for (const node of directives) {
    const name = node.name.value;
    if (name === 'skip' || name === 'include' || !node.arguments?.length) continue;
    const def = schema.getDirective(name);
    if (!def) continue;
    let args = directiveArgs.get(def);
    if (!args) directiveArgs.set(def, (args = new Map(def.args.map((a) => [a.name, a]))));
    cost += argumentsCost(rt, node.arguments, args, scope, directiveNames(rt, schema));
  }
  return cost;
}

function inputCost(
  rt: GraphQLRuntime,
  value: unknown,
  type: GraphQLInputType,
  weight: number | undefined,
  depth: number,
  names: DirectiveNames,
): number {
  if (value === null || value === undefined || depth > MAX_INPUT_DEPTH) return 0;
  const nullable = rt.isNonNullType(type) ? type.ofType : type;
  if (rt.isListType(nullable)) {
    // A single value where a list is expected is coerced to a list of one (GraphQL §3.11).
    if (!Array.isArray(value)) {
      return inputCost(rt, value, nullable.ofType, weight, depth + 1, names);
    }
    let cost = weight ?? 0;
    for (const item of value) {
      cost += inputCost(rt, item, nullable.ofType, undefined, depth + 1, names);
    }
    return cost;
  }
  if (rt.isInputObjectType(nullable)) {
    if (typeof value !== 'object') return weight ?? 1;
    let cost = weight ?? 1;
    const fields = nullable.getFields();
    for (const [name, fieldValue] of Object.entries(value as Record<string, unknown>)) {
      const field = fields[name];
      if (field) {
        const fieldWeight = declaredWeight(rt, field, names);
        cost += inputCost(rt, fieldValue, field.type, fieldWeight, depth + 1, names);
      }
    }
    return cost;
  }
  return weight ?? 0;
}

/**
 * A value node as plain data, variables replaced; `ABSENT` for an unset variable. Literals
 * nested deeper than `MAX_INPUT_DEPTH` read as `null`: the walk never recurses on the client's
 * say-so.
 */
function resolve(
  rt: GraphQLRuntime,
  node: ValueNode,
  scope: VariableScope,
  depth: number,
): Resolved {
  if (depth > MAX_INPUT_DEPTH) return null;
  switch (node.kind) {
    case rt.Kind.VARIABLE: {
      const name = node.name.value;
      if (Object.prototype.hasOwnProperty.call(scope.values, name)) return scope.values[name];
      // Variables the server does not hand over: the client may have sent any value, so a
      // default in the document says nothing of what runs.
      if (scope.unknown) return UNKNOWN;
      const fallback = scope.defaults.get(name);
      return fallback ? resolve(rt, fallback, scope, depth + 1) : ABSENT;
    }
    case rt.Kind.INT:
    case rt.Kind.FLOAT:
      return Number(node.value);
    case rt.Kind.STRING:
    case rt.Kind.ENUM:
    case rt.Kind.BOOLEAN:
      return node.value;
    case rt.Kind.NULL:
      return null;
    case rt.Kind.LIST:
      return node.values.map((v) => {
        const item = resolve(rt, v, scope, depth + 1);
        return item === ABSENT ? null : item;
      });
    case rt.Kind.OBJECT: {
      const object: Record<string, unknown> = {};
      for (const field of node.fields) {
        const item = resolve(rt, field.value, scope, depth + 1);
        if (item !== ABSENT) object[field.name.value] = item;
      }
      return object;
    }
  }
  return ABSENT;
}
