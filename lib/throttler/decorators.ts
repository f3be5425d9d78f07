import { Inject } from '@nestjs/common';
import {
  THROTTLER_BLOCK_DURATION,
  THROTTLER_KEY_GENERATOR,
  THROTTLER_LIMIT,
  THROTTLER_OPTIONS,
  THROTTLER_SKIP,
  THROTTLER_TRACKER,
  THROTTLER_TTL,
} from './constants.js';
import type {
  Resolvable,
  ThrottlerGenerateKeyFunction,
  ThrottlerGetTrackerFunction,
} from './options.js';
import { ThrottlerStorage } from './storage.js';

/** A route's or controller's settings for one named throttler. */
export interface ThrottlerMethodOrControllerOptions {
  limit?: Resolvable<number>;
  /** **ms**. */
  ttl?: Resolvable<number>;
  /** **ms**; 0 = no block. */
  blockDuration?: Resolvable<number>;
  getTracker?: ThrottlerGetTrackerFunction;
  generateKey?: ThrottlerGenerateKeyFunction;
}

type Target = object | ((...args: unknown[]) => unknown);

function setThrottlerMetadata(
  target: Target,
  options: Record<string, ThrottlerMethodOrControllerOptions>,
): void {
  for (const name in options) {
    const o = options[name]!;
    Reflect.defineMetadata(THROTTLER_TTL + name, o.ttl, target);
    Reflect.defineMetadata(THROTTLER_LIMIT + name, o.limit, target);
    Reflect.defineMetadata(THROTTLER_BLOCK_DURATION + name, o.blockDuration, target);
    Reflect.defineMetadata(THROTTLER_TRACKER + name, o.getTracker, target);
    Reflect.defineMetadata(THROTTLER_KEY_GENERATOR + name, o.generateKey, target);
  }
}

/**
 * Overrides named throttlers on a controller or a route, e.g.
 * `@Throttle({ default: { limit: 3, ttl: 60_000 } })` (ttl in **ms**). The route's setting
 * wins over the controller's, which wins over the module's.
 */
export const Throttle = (
  options: Record<string, ThrottlerMethodOrControllerOptions>,
): MethodDecorator & ClassDecorator => {
  return ((target: Target, _key?: string | symbol, descriptor?: PropertyDescriptor) => {
    if (descriptor) {
      setThrottlerMetadata(descriptor.value as Target, options);
      return descriptor;
    }
    setThrottlerMetadata(target, options);
    return target;
  }) as MethodDecorator & ClassDecorator;
};

/**
 * Skips throttlers on a controller or a route: `@SkipThrottle()` skips the `default` throttler
 * only (as the throttler does); `@SkipThrottle({ long: true })` the one named `long`;
 * `{ default: false }` on a route undoes its controller's skip.
 */
export const SkipThrottle = (
  skip: Record<string, boolean> = { default: true },
): MethodDecorator & ClassDecorator => {
  return ((target: Target, _key?: string | symbol, descriptor?: PropertyDescriptor) => {
    const reflectionTarget = (descriptor?.value as Target | undefined) ?? target;
    for (const key in skip) {
      Reflect.defineMetadata(THROTTLER_SKIP + key, skip[key], reflectionTarget);
    }
    return descriptor ?? target;
  }) as MethodDecorator & ClassDecorator;
};

/** Injects the module options (`ThrottlerModuleOptions`). */
export const InjectThrottlerOptions = (): PropertyDecorator & ParameterDecorator =>
  Inject(THROTTLER_OPTIONS);

/** Injects the storage (`ThrottlerStorage`). */
export const InjectThrottlerStorage = (): PropertyDecorator & ParameterDecorator =>
  Inject(ThrottlerStorage);
