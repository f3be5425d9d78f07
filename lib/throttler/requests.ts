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
import { markUnsetBlock } from './block-default.js';

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
 * One throttler of a request, resolved as the throttler resolves it: undefined when
 * `@SkipThrottle` or `skipIf` skips it; else each setting from the route, else the
 * controller (`@Throttle`), else the throttler's options, `blockDuration` defaulting to the
 * ttl. Called throttler by throttler, in the guard's order, so that the functions of a
 * throttler after a refusing one are not called (as in the throttler).
 * @throws whatever `skipIf` or a setting function throws, and `ThrottlerSettingError`
 *   for a setting that resolves to no number (`NaN`, `undefined`): the request is refused
 *   with that error, as the throttler refuses it, never admitted unlimited
 */
export async function throttlerRequest(
  context: ExecutionContext,
  throttler: ThrottlerOptions,
  common: Pick<ThrottlerOptions, 'skipIf' | 'getTracker' | 'generateKey'>,
  reflector: Reflector,
): Promise<ThrottlerRequest | undefined> {
  const targets = [context.getHandler(), context.getClass()];
  const name = throttler.name!;
  const read = <T>(key: string) => reflector.getAllAndOverride<T | undefined>(key + name, targets);
  const skipIf = throttler.skipIf || common.skipIf;
  if (read<boolean>(THROTTLER_SKIP) || skipIf?.(context)) return undefined;
  const block = read<Resolvable<number>>(THROTTLER_BLOCK_DURATION) ?? throttler.blockDuration;
  const limit = await resolveNumber(
    context,
    read(THROTTLER_LIMIT) ?? throttler.limit,
    'limit',
    name,
  );
  const ttl = await resolveNumber(context, read(THROTTLER_TTL) ?? throttler.ttl, 'ttl', name);
  const blockDuration = await resolveNumber(context, block ?? ttl, 'blockDuration', name);
  if (block === undefined) markUnsetBlock(context, name, blockDuration);
  return {
    context,
    limit,
    ttl,
    blockDuration,
    throttler,
    getTracker: read(THROTTLER_TRACKER) || throttler.getTracker || common.getTracker!,
    generateKey: read(THROTTLER_KEY_GENERATOR) || throttler.generateKey || common.generateKey!,
  };
}
