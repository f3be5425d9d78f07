/**
 * Page objects: which lists a slicing argument sizes when the field it is on returns one object
 * (a connection, a page) rather than a list. The answer depends only on the returned type, so
 * it is worked out once per type of a schema and shared by every field returning that type.
 */
import type { GraphQLNamedType, GraphQLOutputType, GraphQLSchema } from 'graphql';
import type { GraphQLRuntime } from './runtime.js';
import type { SizedSpec } from './sized.js';
import type { ListSizeInfo } from './weights.js';

type Spec = Map<string, SizedSpec | true>;

/** The page spec of each type met so far; `null` where no list can be reached. */
const pageSpecs = new WeakMap<GraphQLNamedType, Spec | null>();

/**
 * Slicing arguments on a field that returns one object (no list) and no `sizedFields` size the
 * lists that object holds: `posts(limit: 5000) { total items { id } }` asks for 5,000 items, and
 * so does `posts(limit: 5000) { data { items { id } } }`, the list one singular object further
 * down. From the returned type, every path through singular (non-list) object fields ends at
 * its first list field, which takes the size; lists below that list are not sized by it (each
 * item's own lists are its own). An interface or union counts the fields of each possible type.
 * Explicit `sizedFields` replace all of this.
 */
export function pageSized(
  rt: GraphQLRuntime,
  schema: GraphQLSchema,
  ls: ListSizeInfo | undefined,
  named: GraphQLNamedType,
  listDepth: number,
): ListSizeInfo | undefined {
  if (!ls || listDepth > 0 || ls.slicingArguments.length === 0) return ls;
  if (ls.sizedFields && ls.sizedFields.size > 0) return ls;
  return { ...ls, sizedFields: pageSpec(rt, schema, named) };
}

/** The object-typed fields of a type, and of each possible type of an abstract one. */
function fieldsOf(
  rt: GraphQLRuntime,
  schema: GraphQLSchema,
  type: GraphQLNamedType,
): [string, GraphQLOutputType][] {
  const fields: [string, GraphQLOutputType][] = [];
  const add = (from: GraphQLNamedType): void => {
    if (!rt.isObjectType(from) && !rt.isInterfaceType(from)) return;
    for (const [name, field] of Object.entries(from.getFields())) fields.push([name, field.type]);
  };
  add(type);
  if (rt.isAbstractType(type)) for (const member of schema.getPossibleTypes(type)) add(member);
  return fields;
}

/**
 * The spec of `root`: `true` for each list field, a nested spec for each singular field whose
 * type reaches a list through singular fields. Linear in the types and fields reachable: each
 * type is read once, and a type met again (a cycle such as `Page.next: Page`) shares its spec.
 */
function pageSpec(
  rt: GraphQLRuntime,
  schema: GraphQLSchema,
  root: GraphQLNamedType,
): SizedSpec | undefined {
  const known = pageSpecs.get(root);
  if (known !== undefined) return known ?? undefined;
  // The types reachable through singular fields, each with its fields, in the order met.
  const order: GraphQLNamedType[] = [];
  const edges = new Map<GraphQLNamedType, [string, GraphQLNamedType | true][]>();
  const stack = [root];
  while (stack.length > 0) {
    const type = stack.pop()!;
    if (edges.has(type) || pageSpecs.has(type)) continue;
    const out: [string, GraphQLNamedType | true][] = [];
    edges.set(type, out);
    order.push(type);
    for (const [name, fieldType] of fieldsOf(rt, schema, type)) {
      if (rt.isListType(rt.getNullableType(fieldType))) out.push([name, true]);
      else {
        const next = rt.getNamedType(fieldType);
        if (rt.isLeafType(next)) continue;
        out.push([name, next]);
        stack.push(next);
      }
    }
  }
  // Which of them reach a list: a fixpoint over the reversed edges, each edge followed once.
  const reaches = new Set<GraphQLNamedType>();
  const parents = new Map<GraphQLNamedType, GraphQLNamedType[]>();
  const queue: GraphQLNamedType[] = [];
  const reached = (type: GraphQLNamedType): void => {
    if (reaches.has(type)) return;
    reaches.add(type);
    queue.push(type);
  };
  for (const type of order) {
    for (const [, target] of edges.get(type)!) {
      if (target === true) reached(type);
      else if (pageSpecs.has(target)) {
        if (pageSpecs.get(target)) reached(type);
      } else {
        let list = parents.get(target);
        if (!list) parents.set(target, (list = []));
        list.push(type);
      }
    }
  }
  while (queue.length > 0) {
    for (const parent of parents.get(queue.pop()!) ?? []) reached(parent);
  }
  // The specs, sharing one map per type so that cycles close on themselves.
  for (const type of order) pageSpecs.set(type, reaches.has(type) ? new Map() : null);
  for (const type of order) {
    const spec = pageSpecs.get(type);
    if (!spec) continue;
    for (const [name, target] of edges.get(type)!) {
      // a field named alike on two possible types: a list wins, else the first met
      if (target === true) spec.set(name, true);
      else if (!spec.has(name)) {
        const below = pageSpecs.get(target);
        if (below) spec.set(name, below);
      }
    }
  }
  return pageSpecs.get(root) ?? undefined;
}
