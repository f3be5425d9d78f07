/**
 * The actual cost: the requested walk again, over the executed result's `data` (IBM §5.1.3,
 * Query Response Analysis). Lists count at their returned length, never more than the size
 * requested for them; a null value costs its field's weight and nothing below it. Every
 * step is at most its requested twin, so the total never exceeds the requested cost.
 */
import type { FieldNode, GraphQLNamedType, GraphQLObjectType, SelectionSetNode } from 'graphql';
import { argumentsCost, directivesCost, isExcluded } from './arguments.js';
import {
  applies,
  fieldInfo,
  listSizes,
  memoKey,
  ownWeight,
  type FieldInfo,
  type ListSizes,
  type Sized,
  type Walk,
} from './context.js';
import { typeWeight } from './weights.js';

type Data = Readonly<Record<string, unknown>>;

/** Actual cost points of the selections of `set` on one returned object of type `type`. */
export function selectionsActual(
  walk: Walk,
  set: SelectionSetNode,
  type: GraphQLObjectType,
  data: Data,
  sized: Sized | undefined,
): number {
  const { rt } = walk;
  let cost = 0;
  for (const selection of set.selections) {
    if (isExcluded(rt, selection.directives, walk.scope)) continue;
    if (selection.kind === rt.Kind.FIELD) {
      const name = selection.name.value;
      const key = selection.alias?.value ?? name;
      // Missing: the field was not executed (an error above it, or aborted): nothing ran.
      if (name === '__typename' || !Object.prototype.hasOwnProperty.call(data, key)) continue;
      const info = fieldInfo(walk, type, name);
      if (!info) continue;
      const upstream = sized?.names.has(name) ? sized.size : undefined;
      cost += fieldActual(walk, selection, info, data[key], upstream);
    } else if (selection.kind === rt.Kind.INLINE_FRAGMENT) {
      const condition = selection.typeCondition?.name.value;
      if (condition !== undefined && !applies(walk, condition, type)) continue;
      cost += selectionsActual(walk, selection.selectionSet, type, data, sized);
    } else {
      const name = selection.name.value;
      const fragment = walk.fragments.get(name);
      if (!fragment || walk.active.has(name)) continue;
      if (!applies(walk, fragment.typeCondition.name.value, type)) continue;
      walk.active.add(name);
      cost += selectionsActual(walk, fragment.selectionSet, type, data, sized);
      walk.active.delete(name);
    }
  }
  return cost;
}

function fieldActual(
  walk: Walk,
  node: FieldNode,
  info: FieldInfo,
  value: unknown,
  upstream: number | undefined,
): number {
  const own = ownWeight(walk, info);
  let cost: number;
  if (value === null || value === undefined) {
    cost = own; // the resolver ran and returned nothing: no selection below it ran
  } else if (info.listDepth > 0) {
    const sizes = listSizes(walk, node, info, upstream);
    cost = Math.max(listActual(walk, node, info, sizes, value, 1), own);
  } else {
    const sized = info.leaf ? undefined : listSizes(walk, node, info, upstream).sized;
    cost = itemActual(walk, node, info, value, sized);
  }
  cost += argumentsCost(walk.rt, node.arguments, info.args, walk.scope);
  cost += directivesCost(walk.rt, walk.schema, node.directives, walk.scope);
  return cost > 0 ? cost : 0;
}

/** A returned list at `level` (1 = outermost), at most as many items as were requested. */
function listActual(
  walk: Walk,
  node: FieldNode,
  info: FieldInfo,
  sizes: ListSizes,
  value: unknown,
  level: number,
): number {
  if (!Array.isArray(value)) return itemActual(walk, node, info, value, sizes.sized);
  const n = Math.min(value.length, level === 1 ? sizes.outer : sizes.inner);
  let cost = 0;
  for (let i = 0; i < n; i++) {
    const item: unknown = value[i];
    if (item === null || item === undefined) continue;
    cost +=
      level < info.listDepth
        ? listActual(walk, node, info, sizes, item, level + 1)
        : itemActual(walk, node, info, item, sizes.sized);
  }
  return cost;
}

/**
 * One returned value. For an interface or union, the real `__typename` in `data` names its
 * object type (`typeOf`); without one, every possible type's reading is counted and the most
 * expensive kept, as the requested cost did. Each reading of a value is remembered, so the
 * values below it are not walked again for each reading of each ancestor: the walk is linear
 * in the size of `data` times the possible types.
 */
function itemActual(
  walk: Walk,
  node: FieldNode,
  info: FieldInfo,
  value: unknown,
  sized: Sized | undefined,
): number {
  const { rt, schema } = walk;
  const set = node.selectionSet;
  if (info.leaf || !set || typeof value !== 'object' || value === null)
    return ownWeight(walk, info);
  const data = value as Data;
  const named: GraphQLNamedType = info.named;
  const concrete = rt.isObjectType(named) ? named : typeOf(walk, named, set, data);
  if (concrete) {
    const weight = info.weight ?? typeWeight(rt, schema, concrete);
    return weight + selectionsActual(walk, set, concrete, data, sized);
  }
  if (!rt.isAbstractType(named)) return ownWeight(walk, info);
  let max = ownWeight(walk, info);
  for (const member of schema.getPossibleTypes(named)) {
    const weight = info.weight ?? typeWeight(rt, schema, member);
    max = Math.max(max, weight + rememberedActual(walk, set, member, data, sized));
  }
  return max;
}

/** `selectionsActual` of one reading of a value, remembered for this call. */
function rememberedActual(
  walk: Walk,
  set: SelectionSetNode,
  type: GraphQLObjectType,
  data: Data,
  sized: Sized | undefined,
): number {
  walk.actualMemo ??= new Map();
  let bySet = walk.actualMemo.get(data);
  if (!bySet) walk.actualMemo.set(data, (bySet = new Map()));
  let byType = bySet.get(set);
  if (!byType) bySet.set(set, (byType = new Map()));
  const key = memoKey(type, sized);
  let cost = byType.get(key);
  if (cost === undefined) {
    cost = selectionsActual(walk, set, type, data, sized);
    byType.set(key, cost);
  }
  return cost;
}

/**
 * The object type of an abstract value, from a response key that the selection set maps to
 * the real `__typename` meta field only (`__typename`, or an alias of it such as
 * `t: __typename`), and only if it names a possible type of `abstract`. A key that is an alias
 * of another field anywhere in the set (`__typename: title`, a client's attempt to name a
 * cheaper type) is never read; `undefined` when no key can be trusted.
 */
function typeOf(
  walk: Walk,
  abstract: GraphQLNamedType,
  set: SelectionSetNode,
  data: Data,
): GraphQLObjectType | undefined {
  const { rt, schema } = walk;
  if (!rt.isAbstractType(abstract)) return undefined;
  for (const key of typenameKeys(walk, set)) {
    const name = data[key];
    if (typeof name !== 'string') continue;
    const type = schema.getType(name);
    return type && rt.isObjectType(type) && schema.isSubType(abstract, type) ? type : undefined;
  }
  return undefined;
}

/** The response keys of `set` (fragments included) under which only `__typename` is selected. */
function typenameKeys(walk: Walk, set: SelectionSetNode): readonly string[] {
  walk.typenameKeys ??= new Map();
  let keys = walk.typenameKeys.get(set);
  if (keys) return keys;
  const trusted = new Map<string, boolean>();
  const visit = (current: SelectionSetNode, seen: Set<string>): void => {
    for (const selection of current.selections) {
      if (selection.kind === walk.rt.Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        const real = selection.name.value === '__typename';
        trusted.set(key, (trusted.get(key) ?? true) && real);
      } else if (selection.kind === walk.rt.Kind.INLINE_FRAGMENT) {
        visit(selection.selectionSet, seen);
      } else {
        const name = selection.name.value;
        const fragment = walk.fragments.get(name);
        if (!fragment || seen.has(name)) continue;
        seen.add(name);
        visit(fragment.selectionSet, seen);
      }
    }
  };
  visit(set, new Set());
  keys = [...trusted].filter(([, real]) => real).map(([key]) => key);
  walk.typenameKeys.set(set, keys);
  return keys;
}
