/**
 * The actual cost: the requested walk again, over the executed result's `data` (IBM §5.1.3,
 * Query Response Analysis). Lists count at the length the response really holds, whatever size
 * was assumed or asked for (a resolver that returns more than asked is charged for it); a null
 * value costs its field's weight and nothing below it. Named fragments are expanded once per
 * selection set, as graphql-js collects fields; every selection read is a step of the budget.
 */
import type { FieldNode, GraphQLNamedType, GraphQLObjectType, SelectionSetNode } from 'graphql';
import { argumentsCost, directivesCost, isExcluded } from './arguments.js';
import {
  applies,
  enter,
  fieldInfo,
  ownWeight,
  step,
  type FieldInfo,
  type Walk,
} from './walk-state.js';
import { typeWeight } from './weights.js';

type Data = Readonly<Record<string, unknown>>;

/** Actual cost points of the selections of `set` on one returned object of type `type`. */
function selectionsActual(
  walk: Walk,
  set: SelectionSetNode,
  type: GraphQLObjectType,
  data: Data,
  visited?: Set<string>,
): number {
  const { rt } = walk;
  enter(walk);
  let cost = 0;
  for (const selection of set.selections) {
    step(walk);
    if (isExcluded(rt, selection.directives, walk.scope)) continue;
    if (selection.kind === rt.Kind.FIELD) {
      const name = selection.name.value;
      const key = selection.alias?.value ?? name;
      // Missing: the field was not executed (an error above it, or aborted): nothing ran.
      if (name === '__typename' || !Object.prototype.hasOwnProperty.call(data, key)) continue;
      const info = fieldInfo(walk, type, name);
      if (info) cost += fieldActual(walk, selection, info, data[key]);
    } else if (selection.kind === rt.Kind.INLINE_FRAGMENT) {
      const condition = selection.typeCondition?.name.value;
      if (condition !== undefined && !applies(walk, condition, type)) continue;
      visited ??= new Set(); // one collection of fields, as in requested.ts
      cost += selectionsActual(walk, selection.selectionSet, type, data, visited);
    } else {
      const name = selection.name.value;
      const fragment = walk.fragments.get(name);
      visited ??= new Set();
      if (!fragment || visited.has(name)) continue;
      visited.add(name);
      if (!applies(walk, fragment.typeCondition.name.value, type)) continue;
      cost += selectionsActual(walk, fragment.selectionSet, type, data, visited);
    }
  }
  walk.depth--;
  return cost;
}

/** Actual cost points of one executed field whose value in `data` is `value`. */
export function fieldActual(walk: Walk, node: FieldNode, info: FieldInfo, value: unknown): number {
  const own = ownWeight(walk, info);
  let cost: number;
  if (value === null || value === undefined) {
    cost = own; // the resolver ran and returned nothing: no selection below it ran
  } else if (info.listDepth > 0) {
    cost = Math.max(listActual(walk, node, info, value, 1), own);
  } else {
    cost = itemActual(walk, node, info, value);
  }
  cost += argumentsCost(walk.rt, node.arguments, info.args, walk.scope, walk.names);
  cost += directivesCost(walk.rt, walk.schema, node.directives, walk.scope);
  return cost > 0 ? cost : 0;
}

/** A returned list at `level` (1 = outermost): every item it holds. */
function listActual(
  walk: Walk,
  node: FieldNode,
  info: FieldInfo,
  value: unknown,
  level: number,
): number {
  if (!Array.isArray(value)) return itemActual(walk, node, info, value);
  let cost = 0;
  for (const item of value as readonly unknown[]) {
    step(walk);
    if (item === null || item === undefined) continue;
    cost +=
      level < info.listDepth
        ? listActual(walk, node, info, item, level + 1)
        : itemActual(walk, node, info, item);
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
function itemActual(walk: Walk, node: FieldNode, info: FieldInfo, value: unknown): number {
  const { rt, schema } = walk;
  const set = node.selectionSet;
  if (info.leaf || !set || typeof value !== 'object' || value === null) {
    return ownWeight(walk, info);
  }
  const data = value as Data;
  const named: GraphQLNamedType = info.named;
  const concrete = rt.isObjectType(named) ? named : typeOf(walk, named, set, data);
  if (concrete) {
    const weight = info.weight ?? typeWeight(rt, schema, concrete);
    return weight + selectionsActual(walk, set, concrete, data);
  }
  if (!rt.isAbstractType(named)) return ownWeight(walk, info);
  let max = ownWeight(walk, info);
  for (const member of schema.getPossibleTypes(named)) {
    const weight = info.weight ?? typeWeight(rt, schema, member);
    max = Math.max(max, weight + rememberedActual(walk, set, member, data));
  }
  return max;
}

/** `selectionsActual` of one reading of a value, remembered for this call. */
function rememberedActual(
  walk: Walk,
  set: SelectionSetNode,
  type: GraphQLObjectType,
  data: Data,
): number {
  walk.actualMemo ??= new Map();
  let bySet = walk.actualMemo.get(data);
  if (!bySet) walk.actualMemo.set(data, (bySet = new Map()));
  let byType = bySet.get(set);
  if (!byType) bySet.set(set, (byType = new Map()));
  let cost = byType.get(type.name);
  if (cost === undefined) {
    cost = selectionsActual(walk, set, type, data);
    byType.set(type.name, cost);
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

/**
 * The response keys of `set` (fragments included) under which only `__typename` is selected.
 * Iterative, each fragment read once: a deep or wide document costs its size, no more.
 */
function typenameKeys(walk: Walk, set: SelectionSetNode): readonly string[] {
  walk.typenameKeys ??= new Map();
  let keys = walk.typenameKeys.get(set);
  if (keys) return keys;
  const trusted = new Map<string, boolean>();
  const seen = new Set<string>();
  const pending: SelectionSetNode[] = [set];
  for (let current = pending.pop(); current; current = pending.pop()) {
    for (const selection of current.selections) {
      step(walk);
      if (selection.kind === walk.rt.Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        const real = selection.name.value === '__typename';
        trusted.set(key, (trusted.get(key) ?? true) && real);
      } else if (selection.kind === walk.rt.Kind.INLINE_FRAGMENT) {
        pending.push(selection.selectionSet);
      } else {
        const name = selection.name.value;
        const fragment = walk.fragments.get(name);
        if (!fragment || seen.has(name)) continue;
        seen.add(name);
        pending.push(fragment.selectionSet);
      }
    }
  }
  keys = [...trusted].filter(([, real]) => real).map(([key]) => key);
  walk.typenameKeys.set(set, keys);
  return keys;
}
