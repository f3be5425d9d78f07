import type { ExecutionContext } from '@nestjs/common';
import type { Reflector } from '@nestjs/core';
import {
  THROTTLER_BLOCK_DURATION,
  THROTTLER_KEY_GENERATOR,
  THROTTLER_LIMIT,
  THROTTLER_SKIP,
  THROTTLER_TRACKER,
  THROTTLER_TTL,
} from './constants.js';
import type { Resolvable, ThrottlerOptions, ThrottlerRequest } from './options.js';
import { resolveNumber, toNumber } from './request-response.js';

/**
 * Per context, the throttlers that set no `blockDuration` anywhere, with the default they were
 * handed (the ttl, **ms**): `handleRequest` receives the throttler's default, for subclasses
 * that count themselves; this package's storages count such a throttler without a block
 * (nestjs/throttler#2208). Keyed by context and name, so a request a subclass copies
 * (`super.handleRequest({ ...request })`) is still recognised.
 */
const unsetBlocks = new WeakMap<object, Map<string, number>>();

/** Whether `request`'s block is the throttler's default, set nowhere (see {@link unsetBlocks}). */
export function blockUnset(request: ThrottlerRequest): boolean {
  const name = request.throttler?.name;
  const unset = name === undefined ? undefined : unsetBlocks.get(request.context)?.get(name);
  return unset !== undefined && unset === request.blockDuration;
}

/**
 * Checks the throttlers' settings that are set and not functions when the module starts:
 * `limit`, `ttl` and `blockDuration` must be numbers (or numeric strings). `Infinity` is a
 * number (no limit, a window that never ends).
 * @throws {Error} naming the setting, the throttler and the value, e.g.
 *   `Invalid "limit" for the "default" throttler: expected a number, got "ten".`
 */
export function checkThrottlers(throttlers: readonly ThrottlerOptions[]): void {
  for (const throttler of throttlers) {
    const name = throttler.name ?? 'default';
    for (const option of ['limit', 'ttl', 'blockDuration'] as const) {
      const value: unknown = throttler[option];
      // Unset: a route's `@Throttle` may set it, or `skipIf` skip the throttler.
      if (typeof value === 'function' || value === undefined) continue;
      toNumber(value, option, name);
    }
  }
}

/**
 * The throttlers that apply to a request, as the throttler resolves them: those skipped by
 * `@SkipThrottle` or `skipIf` left out, each setting from the route, else the controller
 * (`@Throttle`), else the throttler's options; `blockDuration` defaults to the ttl. A
 * throttler whose setting does not resolve to a number (a function that throws or gives
 * `NaN`) is left out, admitting the request, and handed to `onSettingError`.
 */
export async function throttlerRequests(
  context: ExecutionContext,
  throttlers: readonly ThrottlerOptions[],
  common: Pick<ThrottlerOptions, 'skipIf' | 'getTracker' | 'generateKey'>,
  reflector: Reflector,
  onSettingError: (error: unknown, throttler: string) => void,
): Promise<ThrottlerRequest[]> {
  const targets = [context.getHandler(), context.getClass()];
  const read = <T>(key: string, name: string) =>
    reflector.getAllAndOverride<T | undefined>(key + name, targets);
  const requests: ThrottlerRequest[] = [];
  for (const throttler of throttlers) {
    const name = throttler.name!;
    const skipIf = throttler.skipIf || common.skipIf;
    if (read<boolean>(THROTTLER_SKIP, name) || skipIf?.(context)) continue;
    const block =
      read<Resolvable<number>>(THROTTLER_BLOCK_DURATION, name) ?? throttler.blockDuration;
    let limit: number, ttl: number, blockDuration: number;
    try {
      limit = await resolveNumber(
        context,
        read(THROTTLER_LIMIT, name) ?? throttler.limit,
        'limit',
        name,
      );
      ttl = await resolveNumber(context, read(THROTTLER_TTL, name) ?? throttler.ttl, 'ttl', name);
      blockDuration = await resolveNumber(context, block ?? ttl, 'blockDuration', name);
    } catch (error) {
      onSettingError(error, name);
      continue;
    }
    const request: ThrottlerRequest = {
      context,
      limit,
      ttl,
      blockDuration,
      throttler,
      getTracker: read(THROTTLER_TRACKER, name) || throttler.getTracker || common.getTracker!,
      generateKey:
        read(THROTTLER_KEY_GENERATOR, name) || throttler.generateKey || common.generateKey!,
    };
    if (block === undefined) {
      let unset = unsetBlocks.get(context);
      if (!unset) unsetBlocks.set(context, (unset = new Map()));
      unset.set(name, blockDuration);
    }
    requests.push(request);
  }
  return requests;
}
