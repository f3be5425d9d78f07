/**
 * Page objects: which lists a slicing argument sizes when the field it is on returns one object
 * (a connection, a page) rather than a list. The answer depends only on the returned type, so
 * it is worked out once per type of a schema and shared by every field returning that type.
 */
import type { GraphQLNamedType, GraphQLSchema } from 'graphql';
import type { GraphQLRuntime } from './runtime.js';
import type { SizedSpec, SpecByType } from './sized.js';
import type { ListSizeInfo } from './weights.js';

type Spec = Map<string, SizedSpec | SpecByType | true>;
type ByType = { readonly byType: Map<string, SizedSpec> };

/** The page spec of each type met so far; `null` where no list can be reached. */
const pageSpecs = new WeakMap<GraphQLNamedType, Spec | ByType | null>();

/**
 * Slicing arguments on a field that returns one object (no list) and no `sizedFields` size the
 * lists that object holds: `posts(limit: 5000) { total items { id } }` asks for 5,000 items, and
 * so does `posts(limit: 5000) { data { items { id } } }`, the list one singular object further
 * down. From the returned type, every path through singular (non-list) object fields ends at
 * its first list field, which takes the size; lists below that list are not sized by it (each
 * item's own lists are its own). Where a path meets an interface or union (the returned type
 * or a field's), each possible object type is followed through its own fields: with
 * `union Page = A | B`, `A.data: X` and `B.data: Y` size `X`'s lists on an `A` and `Y`'s on a
 * `B`, whatever the fields are named. Explicit `sizedFields` replace all of this (by name, on
 * every possible type, as IBM's specification reads them).
 */
export function pageSized(
  rt: GraphQLRuntime,
  schema: GraphQLSchema,
  ls: ListSizeInfo | undefined,
  named: GraphQLNamedType,
  listDepth: number,
): ListSizeInfo | undefined {
  if (!ls || listDepth > 0 || ls.slicingArguments.length === 0) return ls;
  // a declared `sizedFields` (by name, never per type); an inferred one arrives empty
  if (ls.sizedFields && 'size' in ls.sizedFields && ls.sizedFields.size > 0) return ls;
  return { ...ls, sizedFields: pageSpec(rt, schema, named) };
}

/**
 * The edges of one type in the graph of singular paths: for an object type, its fields by name
 * (`true` for a list field); for an interface or union, its possible object types by name (a
 * value is always one of them, and is read through that type's own fields).
 */
function edgesOf(
  rt: GraphQLRuntime,
  schema: GraphQLSchema,
  type: GraphQLNamedType,
): [string, GraphQLNamedType | true][] {
  const out: [string, GraphQLNamedType | true][] = [];
  if (rt.isAbstractType(type)) {
    for (const member of schema.getPossibleTypes(type)) out.push([member.name, member]);
  } else if (rt.isObjectType(type)) {
    for (const [name, field] of Object.entries(type.getFields())) {
      if (rt.isListType(rt.getNullableType(field.type))) out.push([name, true]);
      else {
        const next = rt.getNamedType(field.type);
        if (!rt.isLeafType(next)) out.push([name, next]);
      }
    }
  }
  return out;
}

/**
 * The spec of `root`: for an object type, `true` for each list field and a nested spec for
 * each singular field whose type reaches a list through singular fields; for an interface or
 * union, the spec of each possible type that reaches one. Linear in the types and fields
 * reachable: each type is read once, and a type met again (a cycle such as `Page.next: Page`)
 * shares its spec.
 */
function pageSpec(
  rt: GraphQLRuntime,
  schema: GraphQLSchema,
  root: GraphQLNamedType,
): SizedSpec | SpecByType | undefined {
  const known = pageSpecs.get(root);
  if (known !== undefined) return known ?? undefined;
  // The types reachable through singular fields, each with its edges, in the order met.
  const order: GraphQLNamedType[] = [];
  const edges = new Map<GraphQLNamedType, [string, GraphQLNamedType | true][]>();
  const stack = [root];
  while (stack.length > 0) {
    const type = stack.pop()!;
    if (edges.has(type) || pageSpecs.has(type)) continue;
    const out = edgesOf(rt, schema, type);
    edges.set(type, out);
    order.push(type);
    for (const [, target] of out) if (target !== true) stack.push(target);
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
  // The specs, one object per type shared by every path to it, so that cycles close on
  // themselves; each possible type of an abstract one keeps its own spec, never merged by name.
  for (const type of order) {
    const abstract = rt.isAbstractType(type);
    pageSpecs.set(type, reaches.has(type) ? (abstract ? { byType: new Map() } : new Map()) : null);
  }
  for (const type of order) {
    const spec = pageSpecs.get(type);
    if (!spec) continue;
    for (const [name, target] of edges.get(type)!) {
      const below = target === true ? true : pageSpecs.get(target);
      if (!below) continue;
      if (!('byType' in spec)) spec.set(name, below);
      else if (below !== true && !('byType' in below)) spec.byType.set(name, below);
    }
  }
  return pageSpecs.get(root) ?? undefined;
}
