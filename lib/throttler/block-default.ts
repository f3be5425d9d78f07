import { AsyncLocalStorage } from 'node:async_hooks';
import type { ThrottlerRequest } from './options.js';

/**
 * Per context, the throttlers that set no `blockDuration` anywhere, with the default they were
 * handed (the ttl, **ms**): `handleRequest` receives the throttler's default, for subclasses
 * that count themselves; this package's storages count such a throttler without a block
 * (nestjs/throttler#2208). Keyed by context and name, so a request a subclass copies
 * (`super.handleRequest({ ...request })`) is still recognised.
 */
const unsetBlocks = new WeakMap<object, Map<string, number>>();

/**
 * The request whose `handleRequest` is running, for a storage asked by a `handleRequest`
 * override that calls `increment` itself: its unset blocks (it hands over the default block
 * without its context), and the guard's report of a store failure it admits (so the guard's
 * logger says it, once per 10 s for the guard).
 */
interface Handling {
  readonly unset: ReadonlyMap<string, number> | undefined;
  readonly admits: (error: unknown) => boolean;
}
const running = new AsyncLocalStorage<Handling>();

/** Records that throttler `name` of `context` sets no block: it was handed `blockDuration`. */
export function markUnsetBlock(context: object, name: string, blockDuration: number): void {
  let unset = unsetBlocks.get(context);
  if (!unset) unsetBlocks.set(context, (unset = new Map()));
  unset.set(name, blockDuration);
}

/** Whether `request`'s block is the throttler's default, set nowhere (see {@link unsetBlocks}). */
export function blockUnset(request: ThrottlerRequest): boolean {
  const name = request.throttler?.name;
  const unset = name === undefined ? undefined : unsetBlocks.get(request.context)?.get(name);
  return unset !== undefined && unset === request.blockDuration;
}

/**
 * Runs `handle` (a `handleRequest`) with the unset blocks of `context` and the guard's
 * failure report readable by storages.
 */
export function handling<T>(
  context: object,
  admits: (error: unknown) => boolean,
  handle: () => Promise<T>,
): Promise<T> {
  return running.run({ unset: unsetBlocks.get(context), admits }, handle);
}

/** The failure report of the guard whose `handleRequest` is running, if any. */
export function guardReport(): ((error: unknown) => boolean) | undefined {
  return running.getStore()?.admits;
}

/**
 * The block a storage applies to a hit of `throttlerName` handed `blockDuration` (**ms**): 0
 * when it is the default of a throttler that set none, in the request being handled.
 */
export function storedBlock(throttlerName: string, blockDuration: number): number {
  return running.getStore()?.unset?.get(throttlerName) === blockDuration ? 0 : blockDuration;
}
