/**
 * Names of the `@base` twins (BENCH_BASELINE, see baseline.ts): every variant of ours
 * (`nrl-*`) measured a second time on the baseline's build, under its name plus `@base`, and
 * listed right after it. Pure: the tables, the chart and the unit tests share it.
 */

/** What a twin's name ends with. */
const BASE_SUFFIX = '@base';

/** Whether `name` is one of this package's variants (current or `@base`). */
export function isOurs(name: string): boolean {
  return name.startsWith('nrl-');
}

/** Whether `name` is an `@base` twin. */
export function isBase(name: string): boolean {
  return isOurs(name) && name.endsWith(BASE_SUFFIX);
}

/** The `@base` twin's name of one of ours. */
export function baseTwin(name: string): string {
  return `${name}${BASE_SUFFIX}`;
}

/** The variant a twin stands for (`nrl-tb@base` → `nrl-tb`); any other name unchanged. */
export function currentOf(name: string): string {
  return isBase(name) ? name.slice(0, -BASE_SUFFIX.length) : name;
}

/**
 * `items` in order, each of ours followed by its twin (`twin(item)`, which may give none, e.g.
 * when the baseline cannot build it); the others alone, and so are ours whose twin is listed.
 */
export function withTwins<T>(
  items: readonly T[],
  name: (item: T) => string,
  twin: (item: T) => T | undefined,
): T[] {
  const present = new Set(items.map(name));
  return items.flatMap((item) => {
    // A twin already listed is not made again.
    if (!isOurs(name(item)) || isBase(name(item)) || present.has(baseTwin(name(item))))
      return [item];
    const other = twin(item);
    return other === undefined ? [item] : [item, other];
  });
}

/** Variant names with an `@base` twin after each of ours. */
export function withTwinNames(names: readonly string[]): string[] {
  return withTwins(
    names,
    (n) => n,
    (n) => baseTwin(n),
  );
}
