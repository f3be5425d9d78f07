/**
 * The requested cost: one walk over the operation's selections, before execution, with every
 * list at the size the operation may ask for. An upper bound of what execution can cost.
 *
 * Bounded by the document: a named fragment is expanded once per selection set, as graphql-js
 * collects fields (ten spreads of one fragment in a set are one), and its cost is remembered per
 * object type (and per sized spec below a sliced field, as a function of the size: never per
 * size), so that no chain or fan of fragments multiplies the walk. Each selection is a step of
 * the budget, and each nested selection set a level of `MAX_WALK_DEPTH`.
 */
import type { FieldNode, GraphQLNamedType, GraphQLObjectType, SelectionSetNode } from 'graphql';
import { argumentsCost, directivesCost, isExcluded } from './arguments.js';
import {
  applies,
  enter,
  fieldInfo,
  listSizes,
  mul,
  ownWeight,
  step,
  type FieldInfo,
  type Walk,
} from './walk-state.js';
import {
  atLeast,
  constant,
  larger,
  perItem,
  plus,
  plusConstant,
  scale,
  specId,
  specOn,
  valueAt,
  type Form,
  type Sized,
  type SizedSpec,
  type SpecByType,
} from './sized.js';
import { typeWeight } from './weights.js';

/** Cost points of the selections of `set` on one value of object type `type`. */
function selectionsCost(
  walk: Walk,
  set: SelectionSetNode,
  type: GraphQLObjectType,
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
      if (name === '__typename') continue; // answered from the type, no resolver: free
      const info = fieldInfo(walk, type, name);
      if (info) cost += fieldCost(walk, selection, info);
    } else if (selection.kind === rt.Kind.INLINE_FRAGMENT) {
      const condition = selection.typeCondition?.name.value;
      if (condition !== undefined && !applies(walk, condition, type)) continue;
      // one collection of fields: a fragment spread inside is expanded once for all of it
      visited ??= new Set();
      cost += selectionsCost(walk, selection.selectionSet, type, visited);
    } else {
      const name = selection.name.value;
      const fragment = walk.fragments.get(name);
      visited ??= new Set();
      if (!fragment || visited.has(name) || walk.active.has(name)) continue;
      visited.add(name);
      if (!applies(walk, fragment.typeCondition.name.value, type)) continue;
      walk.active.add(name);
      cost += remembered(walk, fragment.selectionSet, type);
      walk.active.delete(name);
    }
  }
  walk.depth--;
  return cost;
}

/**
 * Cost points of one selected field (IBM §5.3.2.2, counted as Apollo Router does): its list
 * size times the cost of one item (the field's weight plus its selections), plus the weight
 * of its arguments; never below 0. A list sliced to 0 items still costs the field's weight
 * once: its resolver runs, and a thousand `first: 0` aliases must not be free.
 */
export function fieldCost(walk: Walk, node: FieldNode, info: FieldInfo): number {
  const sizes = listSizes(walk, node, info);
  const item = info.leaf
    ? ownWeight(walk, info)
    : itemCost(walk, node.selectionSet, info.named, sizes.sized, info.weight);
  let cost = item;
  if (info.listDepth > 0) {
    let count = sizes.outer;
    for (let level = 1; level < info.listDepth; level++) count = mul(count, sizes.inner);
    cost = Math.max(mul(count, item), ownWeight(walk, info));
  }
  cost += extras(walk, node, info);
  return cost > 0 ? cost : 0;
}

/** The weights of a field's arguments and of the arguments of its directives. */
function extras(walk: Walk, node: FieldNode, info: FieldInfo): number {
  const args = argumentsCost(walk.rt, node.arguments, info.args, walk.scope, walk.names);
  return args + directivesCost(walk.rt, walk.schema, node.directives, walk.scope);
}

/**
 * Cost points of one value of a composite type with its selections. For an interface or a
 * union the value is one of its possible object types: the most expensive of them (IBM §7.2),
 * each counted with only the fragments that apply to it. Below a field with `sizedFields`,
 * the selections are priced as a function of the size, then at the size asked.
 */
function itemCost(
  walk: Walk,
  set: SelectionSetNode | undefined,
  type: GraphQLNamedType,
  sized: Sized | undefined,
  weight: number | undefined,
): number {
  const { rt, schema } = walk;
  const below = (member: GraphQLObjectType, own: boolean): number => {
    if (!set) return 0;
    if (sized) {
      return valueAt(
        rememberedForm(walk, set, member, specOn(sized.spec, member.name)),
        sized.size,
      );
    }
    return own ? selectionsCost(walk, set, member) : remembered(walk, set, member);
  };
  if (rt.isObjectType(type)) return (weight ?? typeWeight(rt, schema, type)) + below(type, true);
  if (!rt.isAbstractType(type)) return weight ?? typeWeight(rt, schema, type);
  const possible = schema.getPossibleTypes(type);
  if (possible.length === 0) return weight ?? typeWeight(rt, schema, type);
  let max = -Infinity;
  for (const member of possible) {
    max = Math.max(max, (weight ?? typeWeight(rt, schema, member)) + below(member, false));
  }
  return max;
}

/** `selectionsCost` of a fragment or an abstract type's selection set, remembered per type. */
function remembered(walk: Walk, set: SelectionSetNode, type: GraphQLObjectType): number {
  walk.memo ??= new Map();
  let byType = walk.memo.get(set);
  if (!byType) walk.memo.set(set, (byType = new Map()));
  let cost = byType.get(type.name);
  if (cost === undefined) {
    cost = selectionsCost(walk, set, type);
    byType.set(type.name, cost);
  }
  return cost;
}

/**
 * The cost of the selections of `set` on one value of `type` whose fields named in `spec` take
 * a handed-down size, as a function of that size; remembered per type and spec.
 */
function rememberedForm(
  walk: Walk,
  set: SelectionSetNode,
  type: GraphQLObjectType,
  spec: SizedSpec,
): Form {
  walk.formMemo ??= new Map();
  let byKey = walk.formMemo.get(set);
  if (!byKey) walk.formMemo.set(set, (byKey = new Map()));
  const key = `${type.name}:${specId(spec)}`;
  let form = byKey.get(key);
  if (form === undefined) {
    form = selectionsForm(walk, set, type, spec, new Set());
    byKey.set(key, form);
  }
  return form;
}

function selectionsForm(
  walk: Walk,
  set: SelectionSetNode,
  type: GraphQLObjectType,
  spec: SizedSpec,
  visited: Set<string>,
): Form {
  const { rt } = walk;
  enter(walk);
  let form = constant(0);
  for (const selection of set.selections) {
    step(walk);
    if (isExcluded(rt, selection.directives, walk.scope)) continue;
    if (selection.kind === rt.Kind.FIELD) {
      const name = selection.name.value;
      if (name === '__typename') continue;
      const info = fieldInfo(walk, type, name);
      if (!info) continue;
      const entry = spec.get(name);
      form = entry
        ? plus(form, sizedFieldForm(walk, selection, info, entry))
        : plusConstant(form, fieldCost(walk, selection, info));
    } else if (selection.kind === rt.Kind.INLINE_FRAGMENT) {
      const condition = selection.typeCondition?.name.value;
      if (condition !== undefined && !applies(walk, condition, type)) continue;
      form = plus(form, selectionsForm(walk, selection.selectionSet, type, spec, visited));
    } else {
      const name = selection.name.value;
      const fragment = walk.fragments.get(name);
      if (!fragment || visited.has(name) || walk.active.has(name)) continue;
      visited.add(name);
      if (!applies(walk, fragment.typeCondition.name.value, type)) continue;
      walk.active.add(name);
      form = plus(form, rememberedForm(walk, fragment.selectionSet, type, spec));
      walk.active.delete(name);
    }
  }
  walk.depth--;
  return form;
}

/**
 * A field that takes the handed-down size: its list holds that many items (`entry` is
 * `true`), or its selections hand it further down a `sizedFields` path (`entry` is a spec).
 * A field that is no list takes no size itself; one with `sizedFields` of its own sizes its
 * children with its own slicing arguments instead.
 */
function sizedFieldForm(
  walk: Walk,
  node: FieldNode,
  info: FieldInfo,
  entry: SizedSpec | SpecByType | true,
): Form {
  const own = ownWeight(walk, info);
  const sizes = listSizes(walk, node, info);
  let inner = 1;
  for (let level = 1; level < info.listDepth; level++) inner = mul(inner, sizes.inner);
  let form: Form;
  if (entry === true || info.leaf || sizes.sized || !node.selectionSet) {
    if (entry !== true || info.listDepth === 0) return constant(fieldCost(walk, node, info));
    const item = info.leaf
      ? own
      : itemCost(walk, node.selectionSet, info.named, sizes.sized, info.weight);
    form = atLeast(perItem(mul(inner, item)), own);
  } else {
    const item = itemForm(walk, node.selectionSet, info, entry);
    form = info.listDepth === 0 ? item : atLeast(scale(item, mul(sizes.outer, inner)), own);
  }
  return atLeast(plusConstant(form, extras(walk, node, info)), 0);
}

/**
 * `itemCost` with the selections' sizes handed down along `spec` (on each possible type, its
 * own), as a function of the size.
 */
function itemForm(
  walk: Walk,
  set: SelectionSetNode,
  info: FieldInfo,
  spec: SizedSpec | SpecByType,
): Form {
  const { rt, schema } = walk;
  const type = info.named;
  if (rt.isObjectType(type)) {
    return plusConstant(
      rememberedForm(walk, set, type, specOn(spec, type.name)),
      info.weight ?? typeWeight(rt, schema, type),
    );
  }
  const possible = rt.isAbstractType(type) ? schema.getPossibleTypes(type) : [];
  let form: Form | undefined;
  for (const member of possible) {
    const own = info.weight ?? typeWeight(rt, schema, member);
    const reading = plusConstant(rememberedForm(walk, set, member, specOn(spec, member.name)), own);
    form = form ? larger(form, reading) : reading;
  }
  return form ?? constant(ownWeight(walk, info));
}
