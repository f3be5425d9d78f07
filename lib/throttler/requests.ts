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
import { resolveNumber } from './request-response.js';

/**
 * The requests whose throttler sets no `blockDuration` anywhere: handed to `handleRequest`
 * with the throttler's default (the ttl), for subclasses that count themselves; counted by
 * the guard's own storages without a block (nestjs/throttler#2208).
 */
export const blockUnset = new WeakSet<ThrottlerRequest>();

/**
 * The throttlers that apply to a request, as the throttler resolves them: those skipped by
 * `@SkipThrottle` or `skipIf` left out, each setting from the route, else the controller
 * (`@Throttle`), else the throttler's options; `blockDuration` defaults to the ttl.
 * @throws {Error} for a setting that is not a number
 */
export async function throttlerRequests(
  context: ExecutionContext,
  throttlers: readonly ThrottlerOptions[],
  common: Pick<ThrottlerOptions, 'skipIf' | 'getTracker' | 'generateKey'>,
  reflector: Reflector,
): Promise<ThrottlerRequest[]> {
  const targets = [context.getHandler(), context.getClass()];
  const read = <T>(key: string, name: string) =>
    reflector.getAllAndOverride<T | undefined>(key + name, targets);
  const requests: ThrottlerRequest[] = [];
  for (const throttler of throttlers) {
    const name = throttler.name!;
    const skipIf = throttler.skipIf || common.skipIf;
    if (read<boolean>(THROTTLER_SKIP, name) || skipIf?.(context)) continue;
    const limit = await resolveNumber(
      context,
      read(THROTTLER_LIMIT, name) ?? throttler.limit,
      'limit',
      name,
    );
    const ttl = await resolveNumber(
      context,
      read(THROTTLER_TTL, name) ?? throttler.ttl,
      'ttl',
      name,
    );
    const block =
      read<Resolvable<number>>(THROTTLER_BLOCK_DURATION, name) ?? throttler.blockDuration;
    const request: ThrottlerRequest = {
      context,
      limit,
      ttl,
      blockDuration: await resolveNumber(context, block ?? ttl, 'blockDuration', name),
      throttler,
      getTracker: read(THROTTLER_TRACKER, name) || throttler.getTracker || common.getTracker!,
      generateKey:
        read(THROTTLER_KEY_GENERATOR, name) || throttler.generateKey || common.generateKey!,
    };
    if (block === undefined) blockUnset.add(request);
    requests.push(request);
  }
  return requests;
}
