/** True for a promise or any other `then`-able. */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/**
 * `f` of `value`: at once when it is a value, once it resolves when it is a promise (no
 * promise made for a value, where a chain of stages answers synchronously).
 */
export function andThen<T, U>(
  value: T | Promise<T>,
  f: (value: T) => U | Promise<U>,
): U | Promise<U> {
  return value instanceof Promise ? value.then(f) : f(value);
}
