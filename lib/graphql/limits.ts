/**
 * Operation limits (Apollo Router's `max_depth`, `max_height`, `max_aliases`,
 * `max_root_fields`): one pass over the operation's document, before any resolver and before
 * the cost walk, that measures its shape and answers the first limit it exceeds.
 *
 * The pass is iterative (an explicit stack, so a selection nested thousands of levels deep
 * cannot overflow the call stack) and linear in the document: each selection set is visited
 * once, and a named fragment is measured once and its numbers added at every spread, as the
 * router counts them. Directives are not read: `@skip`/`@include` fields count (an upper bound).
 */
import type { FragmentDefinitionNode, SelectionSetNode } from 'graphql';
import { pickOperation } from './walk-state.js';
import type { LimitExceeded } from './errors.js';
import type { OperationInput } from './cost.js';
import type { GraphQLRuntime } from './runtime.js';

export {
  CostAnalysisLimitError,
  OperationNotFoundError,
  type LimitExceeded,
  type LimitName,
} from './errors.js';

/** Limits on an operation's shape; every field optional, `undefined` is no limit. */
export interface OperationLimits {
  /**
   * The deepest nesting of fields, in levels: a root field is at depth 1, a field in its
   * selection set at 2; inline fragments and fragment spreads add no level (Apollo Router's
   * `max_depth`).
   */
  readonly maxDepth?: number;
  /**
   * The number of distinct fields, fragments included: in each selection set each field name
   * counts once (its aliases are not counted again), and a fragment counts at every spread
   * (Apollo Router's `max_height`).
   */
  readonly maxHeight?: number;
  /** The number of aliased fields, fragments included at every spread (`max_aliases`). */
  readonly maxAliases?: number;
  /**
   * The number of distinct root fields (by name, aliases not counted again), root-level
   * fragments included (`max_root_fields`). Aliases are bounded by `maxAliases`.
   */
  readonly maxRootFields?: number;
}

/**
 * Defaults that a normal app never hits, and an attacker's document does: the GraphiQL
 * introspection query measures depth 15, height 220, 0 aliases, 1 root field. Choose your own
 * from the largest operation your clients send (log `operationLimitExceeded` against tight
 * values in shadow first): depth a few levels above your deepest query, height and aliases
 * twice your largest, root fields above your widest batch.
 */
export const DEFAULT_OPERATION_LIMITS: Required<OperationLimits> = Object.freeze({
  maxDepth: 64,
  maxHeight: 2000,
  maxAliases: 200,
  maxRootFields: 100,
});

interface Measures {
  depth: number;
  height: number;
  aliases: number;
  /** Distinct fields at this set's own level (root fields, for the operation's set). */
  top: number;
}

interface Frame {
  readonly set: SelectionSetNode;
  /** Fields enclosing this set: its own fields are at depth `base + 1`. */
  readonly base: number;
  /** How the set hangs from its parent: a field's selections, or a fragment (inline or named). */
  readonly via: 'field' | 'fragment';
  /** The named fragment whose measures this frame computes, to remember them. */
  readonly fragment: string | undefined;
  readonly keys: Set<string>;
  readonly sum: Measures;
  index: number;
}

const MAX = Number.MAX_SAFE_INTEGER;
const add = (a: number, b: number): number => Math.min(a + b, MAX);

/**
 * The first limit of `limits` that the operation exceeds, `undefined` if none: depth, height,
 * aliases and root fields as `OperationLimits` defines them. `measured` is a lower bound of the
 * real value (the pass stops at the first excess). Pure: no resolver, no schema read.
 *
 * Throws `OperationNotFoundError` when the document has no operation to pick (none, an unknown
 * `operationName`, several without one).
 */
export function operationLimitExceeded(
  runtime: GraphQLRuntime,
  input: OperationInput,
  limits: OperationLimits,
): LimitExceeded | undefined {
  const { operation, fragments } = pickOperation(runtime, input.document, input.operationName);
  const max = {
    maxDepth: bound(limits.maxDepth),
    maxHeight: bound(limits.maxHeight),
    maxAliases: bound(limits.maxAliases),
    maxRootFields: bound(limits.maxRootFields),
  };
  return measure(runtime, operation.selectionSet, fragments, max);
}

function bound(value: number | undefined): number {
  return typeof value === 'number' && value >= 0 ? value : Infinity;
}

function measure(
  rt: GraphQLRuntime,
  root: SelectionSetNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  max: Record<Exclude<LimitExceeded['limit'], 'maxAnalysisSteps'>, number>,
): LimitExceeded | undefined {
  const known = new Map<string, Measures>();
  const pending = new Set<string>();
  const stack: Frame[] = [frame(root, 0, 'field', undefined)];
  const over = (limit: keyof typeof max, measured: number): LimitExceeded | undefined =>
    measured > max[limit] ? { limit, measured, maximum: max[limit] } : undefined;
  const check = (top: Frame): LimitExceeded | undefined =>
    over('maxHeight', top.sum.height) ??
    over('maxAliases', top.sum.aliases) ??
    (top.base === 0 ? over('maxRootFields', top.sum.top) : undefined);

  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const selection = top.set.selections[top.index++];
    if (selection === undefined) {
      stack.pop();
      if (top.fragment !== undefined) {
        known.set(top.fragment, top.sum);
        pending.delete(top.fragment);
      }
      const parent = stack[stack.length - 1];
      if (!parent) break;
      merge(parent.sum, top.sum, top.via);
      const found = check(parent);
      if (found) return found;
      continue;
    }
    if (selection.kind === rt.Kind.FIELD) {
      const depth = top.base + 1;
      const exceeded = over('maxDepth', depth);
      if (exceeded) return exceeded;
      const name = selection.name.value;
      if (!top.keys.has(name)) {
        top.keys.add(name);
        top.sum.height = add(top.sum.height, 1);
        top.sum.top = add(top.sum.top, 1);
      }
      if (selection.alias) top.sum.aliases = add(top.sum.aliases, 1);
      if (top.sum.depth < 1) top.sum.depth = 1;
      const found = check(top);
      if (found) return found;
      if (selection.selectionSet)
        stack.push(frame(selection.selectionSet, depth, 'field', undefined));
    } else if (selection.kind === rt.Kind.INLINE_FRAGMENT) {
      stack.push(frame(selection.selectionSet, top.base, 'fragment', undefined));
    } else {
      const name = selection.name.value;
      const measured = known.get(name);
      if (measured) {
        const exceeded = over('maxDepth', top.base + measured.depth);
        if (exceeded) return exceeded;
        merge(top.sum, measured, 'fragment');
        const found = check(top);
        if (found) return found;
        continue;
      }
      const definition = fragments.get(name);
      // An unknown or cyclic spread is invalid: validation refuses it; count nothing here.
      if (!definition || pending.has(name)) continue;
      pending.add(name);
      stack.push(frame(definition.selectionSet, top.base, 'fragment', name));
    }
  }
  return undefined;
}

function frame(
  set: SelectionSetNode,
  base: number,
  via: Frame['via'],
  fragment: string | undefined,
): Frame {
  return {
    set,
    base,
    via,
    fragment,
    keys: new Set(),
    sum: { depth: 0, height: 0, aliases: 0, top: 0 },
    index: 0,
  };
}

/** Adds a child set's measures into its parent's. */
function merge(into: Measures, child: Measures, via: Frame['via']): void {
  into.height = add(into.height, child.height);
  into.aliases = add(into.aliases, child.aliases);
  if (via === 'field') {
    into.depth = Math.max(into.depth, child.depth + 1);
  } else {
    into.depth = Math.max(into.depth, child.depth);
    into.top = add(into.top, child.top);
  }
}
