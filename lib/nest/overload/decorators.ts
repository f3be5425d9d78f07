import type { ExecutionContext } from '@nestjs/common';
import { quote, RateLimitConfigError } from '../../core/errors.js';
import {
  isPriority,
  PRIORITIES,
  type Priority as PriorityName,
} from '../../core/overload/types.js';

/** `'critical' | 'high' | 'normal' | 'sheddable'`, highest first (see `PRIORITIES`). */
export type Priority = PriorityName;

/** Metadata key of `@Priority`: a priority, or a function of the call. */
export const PRIORITY_METADATA = 'nest-rate-limit:priority';
/** Metadata key of `@SkipLoadShedding`: `true`. */
export const SKIP_LOAD_SHEDDING_METADATA = 'nest-rate-limit:skip-load-shedding';
/** Metadata key of `@OverloadPool`: the pool's name. */
export const OVERLOAD_POOL_METADATA = 'nest-rate-limit:overload-pool';

/**
 * A call's priority chosen per call (a paying plan, a webhook): `rateLimitContext(ctx)`
 * gives it the request on every transport. Synchronous. One that throws or answers no
 * priority gives the route's class or module default (logged as `rate_limit.config_error`).
 */
export type PriorityFn = (ctx: ExecutionContext) => Priority;

/**
 * The priority of a handler's calls, or of every handler of a class (the handler's own
 * wins), under the module's `overload` option: `'critical'`, `'high'`, `'normal'` or
 * `'sheddable'`, or a function of the call. At the concurrency limit the lowest priority
 * present is shed first; `critical` only at the hard cap. Without `overload` it does
 * nothing.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OVERLOAD_OPTION` for anything else, when the
 *   class is defined
 */
export function Priority(priority: Priority | PriorityFn): ClassDecorator & MethodDecorator {
  return (target: object, propertyKey?: string | symbol, descriptor?: PropertyDescriptor) => {
    if (typeof priority !== 'function' && !isPriority(priority)) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OVERLOAD_OPTION',
        `invalid @Priority ${quote(priority)}: expected one of ${PRIORITIES.join(', ')}, or a function of the call`,
        placeOf(target, propertyKey),
      );
    }
    Reflect.defineMetadata(PRIORITY_METADATA, priority, descriptor?.value ?? target);
  };
}

/**
 * Exempts a handler, or every handler of a class, from overload protection: its calls are
 * never shed, and not counted in flight. For liveness endpoints, which must answer while
 * the process is loaded, and for long-lived streams. `@SkipRateLimit` does not exempt.
 */
export function SkipLoadShedding(): ClassDecorator & MethodDecorator {
  return (target: object, _propertyKey?: string | symbol, descriptor?: PropertyDescriptor) => {
    Reflect.defineMetadata(SKIP_LOAD_SHEDDING_METADATA, true, descriptor?.value ?? target);
  };
}

/**
 * Counts a handler's calls (or a class's) against a pool of the `overload` option's
 * `pools`, with a limit of its own, instead of the process's pool: routes that share a
 * database, say. A pool the option does not name fails the start
 * (`ERR_RATE_LIMIT_OVERLOAD_OPTION`).
 */
export function OverloadPool(name: string): ClassDecorator & MethodDecorator {
  return (target: object, propertyKey?: string | symbol, descriptor?: PropertyDescriptor) => {
    if (typeof name !== 'string' || name === '') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OVERLOAD_OPTION',
        `invalid @OverloadPool ${quote(name)}: expected a pool's name`,
        placeOf(target, propertyKey),
      );
    }
    Reflect.defineMetadata(OVERLOAD_POOL_METADATA, name, descriptor?.value ?? target);
  };
}

function placeOf(target: object, propertyKey?: string | symbol): string {
  if (propertyKey === undefined) return (target as { name?: string }).name ?? 'anonymous class';
  return `${(target as { constructor: { name: string } }).constructor.name}.${String(propertyKey)}`;
}
