/**
 * What the requested and the actual cost walks share: the operation picked from its document,
 * per-field facts cached per schema field, list sizes, and arithmetic that saturates at
 * `Number.MAX_SAFE_INTEGER` instead of overflowing to `Infinity` (and `Infinity * 0` to NaN).
 */
import type {
  ConstValueNode,
  DocumentNode,
  FieldNode,
  FragmentDefinitionNode,
  GraphQLArgument,
  GraphQLField,
  GraphQLNamedType,
  GraphQLObjectType,
  GraphQLSchema,
  OperationDefinitionNode,
  SelectionSetNode,
} from 'graphql';
import { sliceSize, type VariableScope } from './arguments.js';
import { CostAnalysisLimitError, OperationNotFoundError } from './errors.js';
import { pageSized } from './pages.js';
import type { GraphQLRuntime } from './runtime.js';
import type { Form, Sized } from './sized.js';
import {
  declaredWeight,
  listSizeOf,
  typeWeight,
  type DirectiveNames,
  type ListSizeInfo,
} from './weights.js';

/** Base cost of each operation type, in cost points. */
export interface OperationTypeCost {
  readonly query: number;
  readonly mutation: number;
  readonly subscription: number;
}

/** What one field of the schema costs, read once per field object. */
export interface FieldInfo {
  readonly def: GraphQLField<unknown, unknown>;
  /** The type under all list and non-null wrappers. */
  readonly named: GraphQLNamedType;
  readonly leaf: boolean;
  /** How many list wrappers the type has: `[[Int]]` is 2. */
  readonly listDepth: number;
  /** `@cost` on the field; `undefined` falls back to the weight of its type. */
  readonly weight: number | undefined;
  readonly listSize: ListSizeInfo | undefined;
  readonly args: ReadonlyMap<string, GraphQLArgument>;
}

/** One analysis call: everything fixed for its duration. */
export interface Walk {
  readonly rt: GraphQLRuntime;
  readonly schema: GraphQLSchema;
  readonly scope: VariableScope;
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  readonly defaultListSize: number;
  /** Whether `__schema` and `__type` count (`CostOptions.countIntrospection`). */
  readonly introspection: boolean;
  /** The names of `@cost` and `@listSize` in this schema (`@link` renames included). */
  readonly names: DirectiveNames;
  /** Named fragments being walked, so that a cycle (invalid anyway) cannot recurse forever. */
  readonly active: Set<string>;
  /** Steps taken (selections visited, values read), and the most allowed. */
  steps: number;
  readonly maxSteps: number;
  /** Selection sets entered and not yet left: the walk's recursion. */
  depth: number;
  /**
   * Requested cost of a selection set on one object type (by name), for fragments and abstract
   * types met again.
   */
  memo: Map<SelectionSetNode, Map<string, number>> | undefined;
  /**
   * Requested cost of a selection set on one object type below a sized field, as a function of
   * the size (`Form`), keyed by type and spec: never by the size itself, so that many sizes do
   * not multiply the walks.
   */
  formMemo: Map<SelectionSetNode, Map<string, Form>> | undefined;
  /**
   * Actual cost of a selection set on one returned object read as one possible type of an
   * abstract type: a value without `__typename` is walked once per possible type, and its
   * descendants must not be walked again for each of those readings.
   */
  actualMemo: Map<object, Map<SelectionSetNode, Map<string, number>>> | undefined;
  /** The response keys under which a selection set holds only the real `__typename`. */
  typenameKeys: Map<SelectionSetNode, readonly string[]> | undefined;
}

/**
 * The most selection sets a walk follows one inside another (fields, fragments and inline
 * fragments each a level): far beyond any real operation (GraphiQL's introspection query nests
 * 15), and well within the call stack, so that no document can overflow it.
 */
export const MAX_WALK_DEPTH = 400;

/** Counts one step of the walk; throws `CostAnalysisLimitError` past the budget. */
export function step(walk: Walk): void {
  if (++walk.steps > walk.maxSteps) {
    throw new CostAnalysisLimitError({
      limit: 'maxAnalysisSteps',
      measured: walk.steps,
      maximum: walk.maxSteps,
    });
  }
}

/** Enters a selection set; throws `CostAnalysisLimitError` past `MAX_WALK_DEPTH`. */
export function enter(walk: Walk): void {
  if (++walk.depth > MAX_WALK_DEPTH) {
    throw new CostAnalysisLimitError({
      limit: 'maxDepth',
      measured: walk.depth,
      maximum: MAX_WALK_DEPTH,
    });
  }
}

/** List sizes of one field in one place of the operation. */
export interface ListSizes {
  /** Size of the outermost list (1 when the field is not a list). */
  readonly outer: number;
  /** Size of each inner list of a nested list type. */
  readonly inner: number;
  /** Handed to the field's sized children, if it has `sizedFields`. */
  readonly sized: Sized | undefined;
}

const MAX_COST = Number.MAX_SAFE_INTEGER;

interface DocumentInfo {
  readonly operations: readonly OperationDefinitionNode[];
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
}

const documents = new WeakMap<DocumentNode, DocumentInfo>();
const fields = new WeakMap<GraphQLField<unknown, unknown>, FieldInfo>();

/** `a * b`, never above `MAX_COST`, and 0 when either is 0 (even against a huge other). */
export function mul(a: number, b: number): number {
  return a === 0 || b === 0 ? 0 : Math.min(a * b, MAX_COST);
}

/** A total as returned: at least 0, at most `MAX_COST`. */
export function clamp(cost: number): number {
  return cost > MAX_COST ? MAX_COST : cost > 0 ? cost : 0;
}

/**
 * The operation to analyse and its fragments. Throws `OperationNotFoundError` on a document
 * that validation would refuse: no operation, several without `operationName`, or an unknown
 * name.
 */
export function pickOperation(
  rt: GraphQLRuntime,
  document: DocumentNode,
  operationName: string | null | undefined,
): { operation: OperationDefinitionNode; fragments: ReadonlyMap<string, FragmentDefinitionNode> } {
  let info = documents.get(document);
  if (!info) {
    const operations: OperationDefinitionNode[] = [];
    const fragments = new Map<string, FragmentDefinitionNode>();
    for (const def of document.definitions) {
      if (def.kind === rt.Kind.OPERATION_DEFINITION) operations.push(def);
      else if (def.kind === rt.Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
    }
    info = { operations, fragments };
    documents.set(document, info);
  }
  let operation: OperationDefinitionNode | undefined;
  if (operationName) {
    operation = info.operations.find((op) => op.name?.value === operationName);
    if (!operation) {
      throw new OperationNotFoundError(
        `GraphQL cost: the document has no operation named "${operationName}".`,
      );
    }
  } else if (info.operations.length === 1) {
    operation = info.operations[0];
  }
  if (!operation) {
    throw new OperationNotFoundError(
      info.operations.length === 0
        ? 'GraphQL cost: the document has no operation.'
        : 'GraphQL cost: the document has several operations, and no operationName says which.',
    );
  }
  return { operation, fragments: info.fragments };
}

/** The operation's variable defaults, by variable name. */
export function variableDefaults(operation: OperationDefinitionNode): Map<string, ConstValueNode> {
  const defaults = new Map<string, ConstValueNode>();
  for (const def of operation.variableDefinitions ?? []) {
    if (def.defaultValue) defaults.set(def.variable.name.value, def.defaultValue);
  }
  return defaults;
}

/** The root object type an operation starts from; throws if the schema has none for it. */
export function rootType(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
): GraphQLObjectType {
  const kind = String(operation.operation);
  const root =
    kind === 'mutation'
      ? schema.getMutationType()
      : kind === 'subscription'
        ? schema.getSubscriptionType()
        : schema.getQueryType();
  if (!root) throw new Error(`GraphQL cost: the schema has no ${kind} type.`);
  return root;
}

/** The facts of field `name` of `parent`, `undefined` if there is no such field. */
export function fieldInfo(
  walk: Walk,
  parent: GraphQLObjectType,
  name: string,
): FieldInfo | undefined {
  const { rt } = walk;
  const meta = name === '__schema' || name === '__type';
  if (meta && !walk.introspection) return undefined;
  const def = !meta
    ? parent.getFields()[name]
    : name === '__schema'
      ? rt.SchemaMetaFieldDef
      : rt.TypeMetaFieldDef;
  if (!def) return undefined;
  let info = fields.get(def);
  if (info) return info;
  let type = def.type;
  let listDepth = 0;
  for (;;) {
    if (rt.isNonNullType(type)) type = type.ofType;
    else if (rt.isListType(type)) {
      listDepth++;
      type = type.ofType;
    } else break;
  }
  const named = rt.getNamedType(def.type);
  info = {
    def,
    named,
    leaf: rt.isLeafType(named),
    listDepth,
    weight: declaredWeight(rt, def, walk.names),
    listSize: pageSized(
      rt,
      walk.schema,
      listSizeOf(rt, def, walk.names) ?? inferredListSize(rt, def, listDepth),
      named,
      listDepth,
    ),
    args: new Map(def.args.map((a) => [a.name, a])),
  };
  fields.set(def, info);
  return info;
}

/**
 * The names of Int arguments taken as slicing arguments on a field that has no `@listSize`:
 * the Relay `first`/`last` (GitHub, Shopify) and the common page sizes of offset pagination
 * (`limit`, `take` as in Prisma and TypeORM, `pageSize`, `perPage`, `top` as in OData).
 * Several given: the largest counts (IBM §8.2). An argument of another type (`limit: String`,
 * `first: [Int]`) is not one. A field's own `@listSize(slicingArguments:)` replaces them.
 */
export const INFERRED_SLICING_ARGUMENTS: readonly string[] = Object.freeze([
  'first',
  'last',
  'limit',
  'take',
  'pageSize',
  'perPage',
  'top',
]);

/**
 * The list fields of a connection that took its slice in earlier versions, when the field
 * returning it has no `@listSize` (the Relay convention): `edges` and `nodes`.
 *
 * @deprecated Sizes follow the data now: a slicing argument on a field returning an object
 * sizes every list field of that object (`edges`, `nodes`, `items`, `results`...), and the
 * first list on each path through its singular object fields (`pageSized`).
 */
export const INFERRED_SIZED_FIELDS: readonly string[] = Object.freeze(['edges', 'nodes']);

/**
 * A `@listSize` for a field that has none, by the conventions GitHub, Shopify and most
 * offset-paginated APIs follow: an Int argument named in `INFERRED_SLICING_ARGUMENTS` slices the
 * field's list, or the lists of the object it returns (`pageSized`). Without it an unannotated
 * `posts(limit: 10000)` would count 10 posts (`defaultListSize`), and an upper bound would not
 * be one.
 */
function inferredListSize(
  rt: GraphQLRuntime,
  def: GraphQLField<unknown, unknown>,
  listDepth: number,
): ListSizeInfo | undefined {
  const slicing = def.args
    .filter((a) => {
      if (!INFERRED_SLICING_ARGUMENTS.includes(a.name)) return false;
      const type = rt.getNullableType(a.type);
      return !rt.isListType(type) && rt.getNamedType(type).name === 'Int';
    })
    .map((a) => a.name);
  if (slicing.length === 0) return undefined;
  return {
    assumedSize: undefined,
    slicingArguments: slicing,
    sizedFields: listDepth === 0 ? new Map() : undefined,
    requireOneSlicingArgument: false,
  };
}

/**
 * The weight of one value the field returns, before its selections: `@cost` on the field,
 * else the weight of its type (heaviest possible type for an interface or union).
 */
export function ownWeight(walk: Walk, info: FieldInfo): number {
  return info.weight ?? typeWeight(walk.rt, walk.schema, info.named);
}

/**
 * The list sizes of a field where it is selected. The outer list: the size handed down by a
 * `sizedFields` parent, else the slicing arguments, else `assumedSize`, else
 * `defaultListSize`. Inner lists of `[[T]]` are not sliced: `assumedSize` or the default.
 * With `sizedFields`, the sliced size is the children's, not the field's own (IBM §8.3).
 */
export function listSizes(
  walk: Walk,
  node: FieldNode,
  info: FieldInfo,
  upstream?: number,
): ListSizes {
  const ls = info.listSize;
  const assumed = ls?.assumedSize ?? walk.defaultListSize;
  const slice = (): number =>
    (ls && sliceSize(walk.rt, ls, node, info.def, walk.scope, assumed)) ?? assumed;
  const sized: Sized | undefined = ls?.sizedFields
    ? { spec: ls.sizedFields, size: slice() }
    : undefined;
  if (info.listDepth === 0) return { outer: 1, inner: 1, sized };
  const outer = upstream ?? (sized ? walk.defaultListSize : slice());
  return { outer, inner: assumed, sized };
}

/** Whether a fragment on type `condition` applies to a value of object type `type`. */
export function applies(walk: Walk, condition: string, type: GraphQLObjectType): boolean {
  if (condition === type.name) return true;
  const conditionType = walk.schema.getType(condition);
  return (
    conditionType !== undefined &&
    walk.rt.isAbstractType(conditionType) &&
    walk.schema.isSubType(conditionType, type)
  );
}
