/**
 * Weights and list sizes read from a schema: the IBM cost directives (`@cost`, `@listSize`)
 * on schema-first definitions, or their code-first twins under `extensions` (see
 * decorators.ts). Read once per schema element and cached in WeakMaps keyed by that element,
 * so an analysis never scans the schema.
 */
import type {
  ConstDirectiveNode,
  ConstValueNode,
  GraphQLField,
  GraphQLNamedType,
  GraphQLSchema,
} from 'graphql';
import type { GraphQLRuntime } from './runtime.js';
import { parseSizedFields, type SizedSpec, type SpecByType } from './sized.js';

/** The key of `extensions` that carries a code-first `@cost`: `extensions.cost = { weight }`. */
export const COST_EXTENSION = 'cost';
/** The key of `extensions` that carries a code-first `@listSize`: `extensions.listSize = {...}`. */
export const LIST_SIZE_EXTENSION = 'listSize';

/** `extensions.cost`: the code-first `@cost(weight:)`. */
export interface CostExtension {
  /**
   * Cost points added for every appearance of the field, type or argument; may be fractional
   * or negative (a field's total is never below 0). A numeric string (the IBM spec types
   * `weight` as `String!`) is accepted too.
   */
  readonly weight: number | string;
}

/** `extensions.listSize`: the code-first `@listSize(...)`, same arguments and meaning. */
export interface ListSizeExtension {
  /** The most items the field's list holds when no slicing argument says otherwise. */
  readonly assumedSize?: number;
  /** Names of the field's Int arguments that bound its list (e.g. `['first', 'last']`). */
  readonly slicingArguments?: readonly string[];
  /**
   * Sub-fields of the returned type whose lists take the size instead (e.g. `['edges']`), or
   * paths to them in selection syntax (`['results { page }']`: `page` inside `results`).
   */
  readonly sizedFields?: readonly string[];
  /** The API expects exactly one slicing argument (IBM default `true`); see `sliceSize`. */
  readonly requireOneSlicingArgument?: boolean;
}

/** `@listSize` as the analysis uses it. */
export interface ListSizeInfo {
  readonly assumedSize: number | undefined;
  readonly slicingArguments: readonly string[];
  readonly sizedFields: SizedSpec | SpecByType | undefined;
  readonly requireOneSlicingArgument: boolean;
}

/** The names under which a schema writes the cost directives. */
export interface DirectiveNames {
  readonly cost: ReadonlySet<string>;
  readonly listSize: ReadonlySet<string>;
}

/** Anything `@cost` may sit on: a field, argument, input field or named type. */
interface Weighted {
  readonly astNode?: { readonly directives?: readonly ConstDirectiveNode[] } | null;
  readonly extensionASTNodes?: ReadonlyArray<{
    readonly directives?: readonly ConstDirectiveNode[];
  }>;
  readonly extensions?: Readonly<Record<string, unknown>> | null;
}

// Apollo Federation prefixes the directives it did not `@link`-import with `federation__`.
const DEFAULT_NAMES: DirectiveNames = Object.freeze({
  cost: new Set(['cost', 'federation__cost']),
  listSize: new Set(['listSize', 'federation__listSize']),
});
const LINKED_SPECS = /\/(federation|cost)\/v\d/;

const schemaNames = new WeakMap<GraphQLSchema, DirectiveNames>();
const declared = new WeakMap<object, number | null>();
const listSizes = new WeakMap<object, ListSizeInfo | null>();
const typeWeights = new WeakMap<GraphQLNamedType, number>();

/**
 * The `@cost` weight declared on a schema element (cost points), or `undefined` when none is
 * (or it is not a finite number). `extensions.cost` wins over the directive: in a code-first
 * schema it is the intended route, and an SDL printed from it may carry a stale directive.
 */
export function declaredWeight(
  rt: GraphQLRuntime,
  element: Weighted,
  names: DirectiveNames = DEFAULT_NAMES,
): number | undefined {
  const cached = declared.get(element);
  if (cached !== undefined) return cached ?? undefined;
  let weight = toWeight(extensionOf(element.extensions, COST_EXTENSION)?.['weight']);
  if (weight === undefined) {
    const directive = findDirective(element, names.cost);
    const value = directive?.arguments?.find((a) => a.name.value === 'weight')?.value;
    if (value) weight = toWeight(literal(rt, value));
  }
  declared.set(element, weight ?? null);
  return weight;
}

/** A field's `@listSize`, from `extensions.listSize` or the directive; `undefined` if none. */
export function listSizeOf(
  rt: GraphQLRuntime,
  field: GraphQLField<unknown, unknown>,
  names: DirectiveNames = DEFAULT_NAMES,
): ListSizeInfo | undefined {
  const cached = listSizes.get(field);
  if (cached !== undefined) return cached ?? undefined;
  let raw: Record<string, unknown> | undefined = extensionOf(field.extensions, LIST_SIZE_EXTENSION);
  if (!raw) {
    const directive = findDirective(field, names.listSize);
    if (directive) {
      raw = {};
      for (const arg of directive.arguments ?? []) raw[arg.name.value] = literal(rt, arg.value);
    }
  }
  const info = raw ? toListSize(raw) : undefined;
  listSizes.set(field, info ?? null);
  return info;
}

/**
 * The weight of one value of a named output type (cost points), IBM §7.1 defaults: scalars and
 * enums 0, objects 1, unless `@cost` says otherwise. An interface or union cannot carry
 * `@cost` (IBM §7.2): it weighs as much as its heaviest possible type, so that the analysis
 * stays an upper bound of what execution returns.
 */
export function typeWeight(
  rt: GraphQLRuntime,
  schema: GraphQLSchema,
  type: GraphQLNamedType,
): number {
  const cached = typeWeights.get(type);
  if (cached !== undefined) return cached;
  let weight: number;
  if (rt.isAbstractType(type)) {
    const possible = schema.getPossibleTypes(type);
    weight = possible.length === 0 ? 1 : -Infinity;
    for (const member of possible) weight = Math.max(weight, typeWeight(rt, schema, member));
  } else {
    weight = declaredWeight(rt, type, directiveNames(rt, schema)) ?? (rt.isLeafType(type) ? 0 : 1);
  }
  typeWeights.set(type, weight);
  return weight;
}

/**
 * The names of `@cost` and `@listSize` in `schema`: their own, Federation's `federation__`
 * forms, and what the schema's `@link` of the cost or Federation spec makes of them: an import
 * renamed (`import: [{ name: "@cost", as: "@renamedCost" }]`), or a namespace (`as: "x"` gives
 * `@x__listSize`, and `@x` for the cost spec's own `@cost`). Read once per schema.
 */
export function directiveNames(rt: GraphQLRuntime, schema: GraphQLSchema): DirectiveNames {
  let names = schemaNames.get(schema);
  if (names) return names;
  const cost = new Set(DEFAULT_NAMES.cost);
  const listSize = new Set(DEFAULT_NAMES.listSize);
  const nodes = [schema.astNode, ...schema.extensionASTNodes];
  for (const node of nodes) {
    for (const directive of node?.directives ?? []) {
      if (directive.name.value !== 'link') continue;
      const args: Record<string, unknown> = {};
      for (const arg of directive.arguments ?? []) args[arg.name.value] = literal(rt, arg.value);
      const url = typeof args['url'] === 'string' ? args['url'] : '';
      const spec = LINKED_SPECS.exec(url)?.[1];
      if (!spec) continue;
      const namespace = typeof args['as'] === 'string' ? args['as'].replace(/^@/, '') : spec;
      const imported = new Map<string, string>();
      for (const item of Array.isArray(args['import']) ? args['import'] : []) {
        const entry = item as unknown;
        if (typeof entry === 'string') imported.set(entry.replace(/^@/, ''), entry);
        else if (typeof entry === 'object' && entry !== null) {
          const { name, as } = entry as { name?: unknown; as?: unknown };
          if (typeof name === 'string') {
            imported.set(name.replace(/^@/, ''), typeof as === 'string' ? as : name);
          }
        }
      }
      for (const [directiveName, into] of [
        ['cost', cost],
        ['listSize', listSize],
      ] as const) {
        const local = imported.get(directiveName);
        if (local !== undefined) into.add(local.replace(/^@/, ''));
        else into.add(directiveName === spec ? namespace : `${namespace}__${directiveName}`);
      }
    }
  }
  names = { cost, listSize };
  schemaNames.set(schema, names);
  return names;
}

function extensionOf(
  extensions: Readonly<Record<string, unknown>> | null | undefined,
  key: string,
): Record<string, unknown> | undefined {
  const value = extensions?.[key];
  return typeof value === 'object' && value !== null
    ? (value as Record<string, unknown>)
    : undefined;
}

function findDirective(
  element: Weighted,
  names: ReadonlySet<string>,
): ConstDirectiveNode | undefined {
  const own = element.astNode?.directives?.find((d) => names.has(d.name.value));
  if (own) return own;
  // `extend type T @cost(...)`: a type's directives may sit on its extensions.
  for (const ext of element.extensionASTNodes ?? []) {
    const found = ext.directives?.find((d) => names.has(d.name.value));
    if (found) return found;
  }
  return undefined;
}

/** A directive argument as plain data: SDL holds constants only, never variables. */
function literal(rt: GraphQLRuntime, node: ConstValueNode): unknown {
  switch (node.kind) {
    case rt.Kind.INT:
    case rt.Kind.FLOAT:
      return Number(node.value);
    case rt.Kind.STRING:
    case rt.Kind.ENUM:
      return node.value;
    case rt.Kind.BOOLEAN:
      return node.value;
    case rt.Kind.LIST:
      return node.values.map((v) => literal(rt, v));
    case rt.Kind.OBJECT: {
      const object: Record<string, unknown> = {};
      for (const field of node.fields) object[field.name.value] = literal(rt, field.value);
      return object;
    }
    default:
      return undefined;
  }
}

function toWeight(value: unknown): number | undefined {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) ? n : undefined;
}

function toListSize(raw: Record<string, unknown>): ListSizeInfo {
  const assumed = raw['assumedSize'];
  const names = (value: unknown): string[] =>
    Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
  const sized = parseSizedFields(names(raw['sizedFields']));
  return {
    assumedSize:
      typeof assumed === 'number' && Number.isInteger(assumed) && assumed >= 0
        ? assumed
        : undefined,
    slicingArguments: names(raw['slicingArguments']),
    sizedFields: sized,
    requireOneSlicingArgument: raw['requireOneSlicingArgument'] !== false,
  };
}
