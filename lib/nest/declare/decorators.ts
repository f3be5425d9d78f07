import { UseInterceptors, type ExecutionContext } from '@nestjs/common';
import { quote, RateLimitConfigError } from '../../core/errors.js';
import { definePolicy } from '../../core/limiter.js';
import { checkCost, type Algorithm, type Policy } from '../../core/policy.js';
import { parseRate, type RateInput } from '../../core/rate.js';
import type { KeyFn } from './keys.js';
import { RateLimitSettleInterceptor } from '../pipeline/settle.interceptor.js';
import { NEST_METADATA, RATE_LIMIT_METADATA, SKIP_RATE_LIMIT_METADATA } from './metadata.js';

/**
 * A rate chosen per request (plans, tiers): see {@link byTier}. `rateLimitContext(ctx)`
 * gives it the request and the user on every transport.
 */
export type RateFn = (ctx: ExecutionContext) => RateInput | Promise<RateInput>;

/**
 * Units a request spends, chosen per request: an integer >= 0. `rateLimitContext(ctx)` gives
 * it the request (or the handler's arguments) on every transport.
 */
export type CostFn = (ctx: ExecutionContext) => number | Promise<number>;

/** Options of {@link RateLimit}. */
export interface RateLimitOptions {
  /** Names the policy; stacked policies need distinct names. Default `'default'`. */
  name?: string;
  /**
   * Budget shared by the routes that name it. Default: one per route (`<Controller>.<handler>`),
   * which `'route'` also says; on the module `default`, `'global'` (one across the API).
   */
  scope?: string;
  /** Default: the module's `algorithm`, else `'token-bucket'`. */
  algorithm?: Algorithm;
  /** Capacity of `token-bucket` / `gcra`. Default: the limit. */
  burst?: number;
  /** Who the request counts against. Default: the module's `key`, else `keys.userOrIp`. */
  key?: KeyFn;
  /** Units per request: an integer >= 0, or a function of the request. Default 1. */
  cost?: number | CostFn;
  /** When the store is unreachable, answer 503 instead of admitting. Default: the module's `failClosed`. */
  failClosed?: boolean;
  /**
   * `'open'`, `'closed'` or `'local'` (insurance limits): see the module's `onStoreFailure`.
   * Wins over `failClosed`. Default: this policy's `failClosed`, else the module's setting.
   */
  onStoreFailure?: StoreFailureMode;
  /** Decide and count, but only log would-be denials (`rate_limit.shadow_blocked`). */
  shadow?: boolean;
  /** Include this policy in the rate-limit headers. Default true. */
  headers?: boolean;
  /** Put the wait in the 429 body. `false` for login pages. Default true. */
  exposeDetails?: boolean;
  /**
   * A penalty: once a request is refused under this policy, its identity is refused for this
   * long, e.g. `'15m'` or a number of **ms** (`Retry-After` shows the block's end). Resets,
   * exemptions and overrides lift it. Default: none.
   */
  block?: string | number;
  /** With `block`: a request refused during the block starts it again. Default false. */
  extendBlock?: boolean;
  /**
   * Count by outcome: `'failed'` gives an admitted request its units back once its response
   * shows it succeeded (failed logins only), `'succeeded'` once it shows it failed. Spent on
   * decision as always; refunded in one atomic store call after the response is sent (HTTP;
   * a request whose response never completes keeps its spending). Default: every request.
   */
  count?: 'failed' | 'succeeded';
  /**
   * With `count`: whether a response failed, from its HTTP status (a thrown exception is
   * answered with its status, 500 for anything but an `HttpException`). Default
   * `status >= 400`.
   */
  failed?: (status: number) => boolean;
}

/**
 * The scope that means "this route's own budget" (`<Controller>.<handler>`): the default of
 * `@RateLimit`, and what a module default names to count per route, as `@nestjs/throttler`
 * does.
 */
export const ROUTE_SCOPE = 'route';

/** See {@link RateLimitModuleOptions.onStoreFailure}. */
export type StoreFailureMode = 'open' | 'closed' | 'local';

/** A policy as declared by `@RateLimit`: a validated static policy, or a rate function. */
export interface DeclaredPolicy {
  readonly name: string;
  /** Validated when the rate is static; resolved per request otherwise. */
  readonly policy?: Policy;
  readonly rateFn?: RateFn;
  readonly options: RateLimitOptions;
  /** `Controller.handler` (or `Controller`) where it was declared, for error messages. */
  readonly where: string;
}

/**
 * Limits a controller (every handler) or one handler. Several stack by `name`; the
 * handler's beat the controller's, which beat the module `default` (DESIGN §6).
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
}

/**
 * Caps the requests of one identity in flight on a controller or handler: `concurrent`
 * slots, taken when a request is admitted and given back when it ends (HTTP: response sent,
 * failed, or connection closed; other transports: the handler's result settles), or after
 * `leaseMs` when its process died. Stacks with `@RateLimit`, all-or-nothing in one store
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
    const { leaseMs, name = 'concurrent', ...shared } = options ?? {};
    // The options shared with @RateLimit are checked as @RateLimit checks them.
    const { options: checked } = declare({ limit: 1, periodMs: 1 }, { ...shared, name }, where);
    const scope = checked.scope === ROUTE_SCOPE ? undefined : checked.scope;
    const policy = definePolicy({ name, concurrent, leaseMs, scope }, where);
    addPolicy(target, { name, policy, options: checked, where }, where, propertyKey, descriptor);
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
  // Slots and outcomes end with the handler's result where no response tells (GraphQL,
  // WebSocket, RPC): only these handlers get the interceptor that watches it.
  const concurrent = declared.policy?.algorithm === 'concurrency';
  const interceptors = (Reflect.getOwnMetadata(NEST_METADATA.interceptors, holder) ??
    []) as unknown[];
  if (
    (concurrent || declared.options.count) &&
    !interceptors.includes(RateLimitSettleInterceptor)
  ) {
    if (descriptor) UseInterceptors(RateLimitSettleInterceptor)(target, propertyKey!, descriptor);
    else UseInterceptors(RateLimitSettleInterceptor)(target as () => void);
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

/**
 * A rate per plan:
 * `byTier({ free: '100/h', pro: '5000/h' }, (ctx) => rateLimitContext(ctx).user?.plan, { fallback: 'free' })`
 * (the helper finds the user wherever the transport keeps it, on Fastify's raw request too).
 * Unknown or missing plans get the fallback.
 * @throws {RateLimitConfigError} at definition, for a bad rate or a fallback that is no tier
 */
export function byTier(
  tiers: Record<string, RateInput>,
  planOf: (ctx: ExecutionContext) => string | undefined | Promise<string | undefined>,
  options: { fallback: string },
): RateFn {
  const where = 'byTier';
  const rates = new Map(
    Object.entries(tiers).map(([plan, rate]) => [plan, parseRate(rate, `${where} tier "${plan}"`)]),
  );
  const fallback = rates.get(options?.fallback);
  if (!fallback) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `fallback ${quote(options?.fallback)} is not one of the tiers ${quote([...rates.keys()])}`,
      where,
    );
  }
  return async (ctx) => rates.get((await planOf(ctx)) ?? '') ?? fallback;
}

/** Validates what can be validated without a request. */
export function declare(
  rate: RateInput | RateFn,
  options: RateLimitOptions,
  where: string,
): DeclaredPolicy {
  if (options === null || typeof options !== 'object') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid @RateLimit options ${quote(options)}`,
      where,
    );
  }
  const { name = 'default', scope, algorithm, burst, cost, block, extendBlock } = options;
  if (typeof cost === 'number') checkCost(cost, undefined, name, where);
  else if (cost !== undefined && typeof cost !== 'function')
    checkCost(cost, undefined, name, where);
  const mode = options.onStoreFailure;
  if (mode !== undefined && mode !== 'open' && mode !== 'closed' && mode !== 'local') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid onStoreFailure ${quote(mode)}: expected 'open', 'closed' or 'local'`,
    );
  }
  for (const flag of ['failClosed', 'shadow', 'headers', 'exposeDetails'] as const) {
    if (options[flag] !== undefined && typeof options[flag] !== 'boolean') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OPTION',
        `invalid ${flag} ${quote(options[flag])}: expected true or false`,
        where,
      );
    }
  }
  if (options.count !== undefined && options.count !== 'failed' && options.count !== 'succeeded') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid count ${quote(options.count)}: expected 'failed' or 'succeeded'`,
      where,
    );
  }
  for (const fn of ['key', 'failed'] as const) {
    if (options[fn] !== undefined && typeof options[fn] !== 'function') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OPTION',
        `invalid ${fn} ${quote(options[fn])}: expected a function`,
        where,
      );
    }
  }
  const shape = {
    name,
    // `'route'` is the route's own scope, which the route table fills in.
    scope: scope === ROUTE_SCOPE ? undefined : scope,
    algorithm,
    burst,
    cost: typeof cost === 'number' ? cost : undefined,
    block,
    extendBlock,
  };
  if (typeof rate === 'function') {
    // The rate comes per request; check the rest on a stand-in rate now, so a bad name,
    // scope, algorithm or burst still fails at definition.
    definePolicy({ ...shape, cost: undefined, rate: { limit: 1, periodMs: 1 } }, where);
    return { name, rateFn: rate, options, where };
  }
  return { name, policy: definePolicy({ ...shape, rate }, where), options, where };
}

function placeOf(target: object, propertyKey?: string | symbol): string {
  if (propertyKey === undefined) return (target as { name?: string }).name ?? 'anonymous class';
  return `${(target as { constructor: { name: string } }).constructor.name}.${String(propertyKey)}`;
}
