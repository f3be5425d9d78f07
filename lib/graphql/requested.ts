/**
 * The requested cost: one walk over the operation's selections, before execution, with every
 * list at the size the operation may ask for. An upper bound of what execution can cost.
 */
import type { FieldNode, GraphQLNamedType, GraphQLObjectType, SelectionSetNode } from 'graphql';
import { argumentsCost, directivesCost, isExcluded } from './arguments.js';
import {
  applies,
  fieldInfo,
  listSizes,
  memoKey,
  mul,
  ownWeight,
  type FieldInfo,
  type Sized,
  type Walk,
} from './context.js';
import { typeWeight } from './weights.js';

/** Cost points of the selections of `set` on one value of object type `type`. */
export function selectionsCost(
  walk: Walk,
  set: SelectionSetNode,
  type: GraphQLObjectType,
  sized: Sized | undefined,
): number {
  const { rt } = walk;
  let cost = 0;
  for (const selection of set.selections) {
    if (isExcluded(rt, selection.directives, walk.scope)) continue;
    if (selection.kind === rt.Kind.FIELD) {
      const name = selection.name.value;
      if (name === '__typename') continue; // answered from the type, no resolver: free
      const info = fieldInfo(walk, type, name);
      if (!info) continue;
      cost += fieldCost(walk, selection, info, sized?.names.has(name) ? sized.size : undefined);
    } else if (selection.kind === rt.Kind.INLINE_FRAGMENT) {
      const condition = selection.typeCondition?.name.value;
      if (condition !== undefined && !applies(walk, condition, type)) continue;
      cost += selectionsCost(walk, selection.selectionSet, type, sized);
    } else {
      const name = selection.name.value;
      const fragment = walk.fragments.get(name);
      if (!fragment || walk.active.has(name)) continue;
      if (!applies(walk, fragment.typeCondition.name.value, type)) continue;
      walk.active.add(name);
      cost += remembered(walk, fragment.selectionSet, type, sized);
      walk.active.delete(name);
    }
  }
  return cost;
}

/**
 * Cost points of one selected field (IBM §5.3.2.2, counted as Apollo Router does): its list
 * size times the cost of one item (the field's weight plus its selections), plus the weight
 * of its arguments; never below 0. A list sliced to 0 items still costs the field's weight
 * once: its resolver runs, and a thousand `first: 0` aliases must not be free.
 */
function fieldCost(walk: Walk, node: FieldNode, info: FieldInfo, upstream?: number): number {
  const sizes = listSizes(walk, node, info, upstream);
  const item = info.leaf
    ? ownWeight(walk, info)
    : itemCost(walk, node.selectionSet, info.named, sizes.sized, info.weight);
  let cost = item;
  if (info.listDepth > 0) {
    let count = sizes.outer;
    for (let level = 1; level < info.listDepth; level++) count = mul(count, sizes.inner);
    cost = Math.max(mul(count, item), ownWeight(walk, info));
  }
  cost += argumentsCost(walk.rt, node.arguments, info.args, walk.scope);
  cost += directivesCost(walk.rt, walk.schema, node.directives, walk.scope);
  return cost > 0 ? cost : 0;
}

/**
 * Cost points of one value of a composite type with its selections. For an interface or a
 * union the value is one of its possible object types: the most expensive of them (IBM §7.2),
 * each counted with only the fragments that apply to it.
 */
export function itemCost(
  walk: Walk,
  set: SelectionSetNode | undefined,
  type: GraphQLNamedType,
  sized: Sized | undefined,
  weight: number | undefined,
): number {
  const { rt, schema } = walk;
  if (rt.isObjectType(type)) {
    const own = weight ?? typeWeight(rt, schema, type);
    return set ? own + selectionsCost(walk, set, type, sized) : own;
  }
  if (!rt.isAbstractType(type)) return weight ?? typeWeight(rt, schema, type);
  const possible = schema.getPossibleTypes(type);
  if (possible.length === 0) return weight ?? typeWeight(rt, schema, type);
  let max = -Infinity;
  for (const member of possible) {
    const own = weight ?? typeWeight(rt, schema, member);
    max = Math.max(max, set ? own + remembered(walk, set, member, sized) : own);
  }
  return max;
}

/**
 * `selectionsCost`, remembered per selection set, object type and handed-down size for this
 * call: a fragment spread again, or an abstract type walked once per possible type, costs one
 * walk, so nested interfaces (connections typed as interfaces included) cannot multiply the
 * work. The walk stays linear in the document's size times the possible types.
 */
function remembered(
  walk: Walk,
  set: SelectionSetNode,
  type: GraphQLObjectType,
  sized: Sized | undefined,
): number {
  walk.memo ??= new Map();
  let byType = walk.memo.get(set);
  if (!byType) walk.memo.set(set, (byType = new Map()));
  const key = memoKey(type, sized);
  let cost = byType.get(key);
  if (cost === undefined) {
    cost = selectionsCost(walk, set, type, sized);
    byType.set(key, cost);
  }
  return cost;
}
