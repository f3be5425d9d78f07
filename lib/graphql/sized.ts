/**
 * Sizes handed down by `@listSize(sizedFields:)`: which fields below a sliced field take its
 * size (`SizedSpec`), and the cost of a selection set as a function of that size (`Form`), so
 * that a selection set is walked once whatever the sizes the document asks for: a hundred
 * aliases of `conn(first: N) { ...F }` with a hundred different N walk `F` once.
 */

/**
 * The fields of a selection set on one value that take a handed-down size, by field name:
 * `true` takes it as its list's size; a nested spec hands it further down
 * (`sizedFields: ["results { page }"]`), to every value the field returns, or to each possible
 * type of an interface or union by its own spec (`SpecByType`).
 */
export type SizedSpec = ReadonlyMap<string, SizedSpec | SpecByType | true>;

/**
 * Where a size goes below a field whose interface or union type is inferred as a page: each
 * possible object type (by name) has its own spec, read from that type's own fields, so that
 * `A.data: X` and `B.data: Y` are each followed along their own type. A possible type not
 * listed reaches no list and takes no size.
 */
export interface SpecByType {
  readonly byType: ReadonlyMap<string, SizedSpec>;
}

/** A size handed down: the spec that says where, and the size in items. */
export interface Sized {
  readonly spec: SizedSpec | SpecByType;
  readonly size: number;
}

const NOWHERE: SizedSpec = new Map();

/** The spec that applies on a value of object type `typeName`. */
export function specOn(spec: SizedSpec | SpecByType, typeName: string): SizedSpec {
  return 'byType' in spec ? (spec.byType.get(typeName) ?? NOWHERE) : spec;
}

/**
 * Cost points as a function of a handed-down size `s` (items, an integer ≥ 0): `zero` at
 * `s = 0`, `k + a × s` above. Every cost of the analysis is of this shape in `s` (a list of `s`
 * items weighs `s` times an item, at least the field's weight once), or is bounded above by one:
 * the operations below keep it an upper bound where weights are negative.
 */
export interface Form {
  readonly zero: number;
  readonly k: number;
  readonly a: number;
}

const MAX = Number.MAX_SAFE_INTEGER;
const sat = (n: number): number => (n > MAX ? MAX : n < -MAX ? -MAX : n);

export function constant(c: number): Form {
  return { zero: c, k: c, a: 0 };
}

export function plus(f: Form, g: Form): Form {
  return { zero: sat(f.zero + g.zero), k: sat(f.k + g.k), a: sat(f.a + g.a) };
}

export function plusConstant(f: Form, c: number): Form {
  return c === 0 ? f : { zero: sat(f.zero + c), k: sat(f.k + c), a: f.a };
}

/** `n` times `f`, `n` a count of items (≥ 0); 0 times anything is 0. */
export function scale(f: Form, n: number): Form {
  if (n === 0) return constant(0);
  return { zero: sat(f.zero * n), k: sat(f.k * n), a: sat(f.a * n) };
}

/** The items of a list of `s` items each costing `item` (cost points): `a = p × item`. */
export function perItem(itemTimesInner: number): Form {
  return { zero: 0, k: 0, a: sat(itemTimesInner) };
}

/**
 * `max(f, y)`, exact where `f` is at least `y` for every `s ≥ 1` (weights ≥ 0: always), else an
 * upper bound (`max(k + a·s, y) ≤ max(k, y) + a·s` for `a ≥ 0`; a decreasing `f` is bounded by
 * its value at `s = 1`).
 */
export function atLeast(f: Form, y: number): Form {
  const zero = Math.max(f.zero, y);
  if (f.a >= 0) {
    const k = f.k + f.a >= y ? f.k : Math.max(f.k, y);
    return zero === f.zero && k === f.k ? f : { zero, k, a: f.a };
  }
  return { zero, k: Math.max(f.k + f.a, y), a: 0 };
}

/** An upper bound of `max(f, g)` (exact when one is above the other everywhere). */
export function larger(f: Form, g: Form): Form {
  return { zero: Math.max(f.zero, g.zero), k: Math.max(f.k, g.k), a: Math.max(f.a, g.a) };
}

/** The value of `f` at size `s`. */
export function valueAt(f: Form, s: number): number {
  return s === 0 ? f.zero : sat(f.k + (f.a === 0 ? 0 : f.a * s));
}

const ids = new WeakMap<SizedSpec, number>();
let nextId = 0;

/** A number naming `spec` in memo keys (specs are read once per schema field, so few). */
export function specId(spec: SizedSpec): number {
  let id = ids.get(spec);
  if (id === undefined) ids.set(spec, (id = ++nextId));
  return id;
}

/** A spec read from `sizedFields`: by field name only, alike on every possible type. */
type NamedSpec = ReadonlyMap<string, NamedSpec | true>;

/**
 * `sizedFields` as a spec: each entry a field name (`"edges"`) or a path in selection syntax
 * (`"results { page }"`, `"a { b c { d } }"`). An entry that does not parse is left out.
 */
export function parseSizedFields(entries: readonly string[]): SizedSpec | undefined {
  const root = new Map<string, NamedSpec | true>();
  for (const entry of entries) {
    const tokens = entry.match(/[_A-Za-z][_0-9A-Za-z]*|[{}]/g) ?? [];
    const parsed = parseTokens(tokens);
    if (parsed) mergeSpec(root, parsed);
  }
  return root.size > 0 ? root : undefined;
}

function parseTokens(tokens: readonly string[]): Map<string, NamedSpec | true> | undefined {
  const stack: Map<string, NamedSpec | true>[] = [new Map()];
  let last: string | undefined;
  for (const token of tokens) {
    const current = stack[stack.length - 1]!;
    if (token === '{') {
      if (last === undefined || stack.length > 16) return undefined;
      const child = new Map<string, NamedSpec | true>();
      current.set(last, child);
      stack.push(child);
      last = undefined;
    } else if (token === '}') {
      if (stack.length === 1) return undefined;
      stack.pop();
      last = undefined;
    } else {
      current.set(token, true);
      last = token;
    }
  }
  return stack.length === 1 ? stack[0] : undefined;
}

function mergeSpec(into: Map<string, NamedSpec | true>, from: NamedSpec): void {
  for (const [name, entry] of from) {
    const existing = into.get(name);
    if (entry === true || existing === undefined || existing === true) {
      if (existing === undefined || entry === true) into.set(name, entry);
      continue;
    }
    const merged = new Map(existing);
    mergeSpec(merged, entry);
    into.set(name, merged);
  }
}
