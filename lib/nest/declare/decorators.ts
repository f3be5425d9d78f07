import { quote, RateLimitConfigError } from '../../core/errors.js';
import { definePolicy } from '../../core/limiter.js';
import type { RateInput } from '../../core/model/rate.js';
import { RateLimitSettleInterceptor } from '../end/settle.interceptor.js';
import {
  INCLUDE_UPLOAD_METADATA,
  NEST_METADATA,
  RATE_LIMIT_METADATA,
  SKIP_RATE_LIMIT_METADATA,
} from './metadata.js';
import { declare } from './declare-policy.js';

export { byTier } from './tiers.js';
import {
  ROUTE_SCOPE,
  type DeclaredPolicy,
  type RateFn,
  type RateLimitOptions,
} from './policy-options.js';

export { declare };
export {
  ROUTE_SCOPE,
  type CostFn,
  type DeclaredPolicy,
  type RateFn,
  type RateLimitOptions,
  type StoreFailureMode,
} from './policy-options.js';

/**
 * Limits a controller (every handler) or one handler. Several stack by `name`; the
 * handler's beat the controller's, which beat the module `default` (see
 * docs/reference/decorators.md).
 *
 * @param rate `'100/m'`, `{ limit, periodMs }`, or a function of the request (see {@link byTier})
 * @throws {RateLimitConfigError} when the class is defined, for a bad rate, algorithm,
 *   burst, name, scope or cost, naming `Controller.handler`
 */
export function RateLimit(
  rate: RateInput | RateFn,
  options: RateLimitOptions = {},
): ClassDecorator & MethodDecorator {
  return (target: object, propertyKey?: string | symbol, descriptor?: PropertyDescriptor) => {
    const where = placeOf(target, propertyKey);
    addPolicy(target, declare(rate, options, where), where, propertyKey, descriptor);
  };
}

/** Options of {@link ConcurrencyLimit}: those of {@link RateLimit} that apply to it. */
export interface ConcurrencyLimitOptions extends Pick<
  RateLimitOptions,
  'scope' | 'key' | 'failClosed' | 'onStoreFailure' | 'shadow' | 'headers' | 'exposeDetails'
> {
  /** Names the policy (stacks with `@RateLimit` policies by name). Default `'concurrent'`. */
  name?: string;
  /**
   * How long, in **ms**, a slot stays taken when its request never gives it back (its
   * process died). Default 30,000: make it longer than the route's slowest request.
   */
  leaseMs?: number;
  /**
   * HTTP (Express, Fastify): take the slot as the request arrives, before its body is read,
   * so that a slow upload holds it too. The route's policies are then decided before body
   * parsing and Nest middleware (keys see no user that middleware would set). Default
   * `false`: the slot is taken when the guards run, once the body has been read.
   */
  includeUpload?: boolean;
}

/**
 * Caps the requests of one identity in flight on a controller or handler: `concurrent`
 * slots, taken when a request is admitted (with `includeUpload`, when it arrives, before its
 * body is read) and held while its handler runs, whatever the client does; given back when
 * the handler's result settles, before the response is written (a streamed body: once it is
 * sent), or after `leaseMs` when its process died. Stacks with `@RateLimit`, all-or-nothing in one store
 * call; a refusal is a 429 with `Retry-After: 1` and `qu="concurrent-requests"` in
 * `RateLimit-Policy`. `@SkipRateLimit()` exempts from it too. `onStoreFailure: 'local'`
 * acts as `'open'` here.
 *
 * @param concurrent slots: an integer >= 1
 * @throws {RateLimitConfigError} when the class is defined, for a bad `concurrent`,
 *   `leaseMs`, name, scope or option, naming `Controller.handler`
 */
export function ConcurrencyLimit(
  concurrent: number,
  options: ConcurrencyLimitOptions = {},
): ClassDecorator & MethodDecorator {
  return (target: object, propertyKey?: string | symbol, descriptor?: PropertyDescriptor) => {
    const where = placeOf(target, propertyKey);
    const { leaseMs, name = 'concurrent', includeUpload, ...shared } = options ?? {};
    // The options shared with @RateLimit are checked as @RateLimit checks them.
    const { options: checked } = declare({ limit: 1, periodMs: 1 }, { ...shared, name }, where);
    const scope = checked.scope === ROUTE_SCOPE ? undefined : checked.scope;
    const policy = definePolicy({ name, concurrent, leaseMs, scope }, where);
    if (includeUpload !== undefined && typeof includeUpload !== 'boolean') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_CONCURRENCY',
        `invalid includeUpload ${quote(includeUpload)}: expected true or false in policy ${quote(name)}`,
        where,
      );
    }
    addPolicy(target, { name, policy, options: checked, where }, where, propertyKey, descriptor);
    if (includeUpload) {
      const holder = (descriptor?.value ?? target) as object;
      const names = (Reflect.getOwnMetadata(INCLUDE_UPLOAD_METADATA, holder) ?? []) as string[];
      Reflect.defineMetadata(INCLUDE_UPLOAD_METADATA, [...names, name], holder);
    }
  };
}

/** Adds a declared policy to a class or handler, and the interceptor it needs. */
function addPolicy(
  target: object,
  declared: DeclaredPolicy,
  where: string,
  propertyKey?: string | symbol,
  descriptor?: PropertyDescriptor,
): void {
  const holder = descriptor?.value ?? target;
  const existing: DeclaredPolicy[] = Reflect.getOwnMetadata(RATE_LIMIT_METADATA, holder) ?? [];
  if (existing.some((d) => d.name === declared.name)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_DUPLICATE_POLICY',
      `two @RateLimit named "${declared.name}": give stacked policies distinct names`,
      where,
    );
  }
  // Decorators apply bottom-up: prepending keeps the order they are written in.
  Reflect.defineMetadata(RATE_LIMIT_METADATA, [declared, ...existing], holder);
  // Slots end with the handler's result, and outcomes too where no response tells (GraphQL,
  // WebSocket, RPC): only these handlers get the interceptor that watches it. First among
  // the holder's interceptors, in whatever order the decorators are written: one that Nest
  // ran before it and that threw would end the call with the slots still held.
  if (declared.policy?.algorithm === 'concurrency' || declared.options.count) {
    const interceptors = (Reflect.getOwnMetadata(NEST_METADATA.interceptors, holder) ??
      []) as unknown[];
    if (interceptors[0] !== RateLimitSettleInterceptor) {
      const others = interceptors.filter((i) => i !== RateLimitSettleInterceptor);
      Reflect.defineMetadata(
        NEST_METADATA.interceptors,
        [RateLimitSettleInterceptor, ...others],
        holder,
      );
    }
  }
}

/**
 * Exempts a controller or handler from every policy it inherits, or only from the named
 * ones: `@SkipRateLimit('daily')`. A handler's own `@RateLimit` still applies.
 */
export function SkipRateLimit(...names: string[]): ClassDecorator & MethodDecorator {
  return (target: object, _propertyKey?: string | symbol, descriptor?: PropertyDescriptor) => {
    const holder = descriptor?.value ?? target;
    const existing: true | string[] | undefined = Reflect.getOwnMetadata(
      SKIP_RATE_LIMIT_METADATA,
      holder,
    );
    // Several @SkipRateLimit('x') @SkipRateLimit('y') add up; a bare one skips everything.
    const skip = names.length === 0 || existing === true ? true : [...(existing ?? []), ...names];
    Reflect.defineMetadata(SKIP_RATE_LIMIT_METADATA, skip, holder);
  };
}

function placeOf(target: object, propertyKey?: string | symbol): string {
  if (propertyKey === undefined) return (target as { name?: string }).name ?? 'anonymous class';
  return `${(target as { constructor: { name: string } }).constructor.name}.${String(propertyKey)}`;
}
