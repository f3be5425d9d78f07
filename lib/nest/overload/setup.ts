import { Inject, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { NEST_METADATA } from '../declare/metadata.js';
import type { OverloadSettings } from '../../core/overload/options.js';
import { handlerKind } from '../module/handlers.js';
import { createOverloadMetrics } from '../observability/overload-metrics.js';
import { RoutePlanner } from '../plan/planner.js';
import { RateLimitSettleInterceptor } from '../end/settle.interceptor.js';
import { isRateLimitGuard } from '../pipeline/stages/after-route-guards.js';

/** Why a `@Priority` function on a route with guards of its own is warned of. */
const PRIORITY_BEFORE_GUARDS =
  "its @Priority function runs before this handler's own guards (a call is admitted or shed " +
  'before any of them): a user an auth guard of the route sets is not known yet. Read the ' +
  'user from the request (a header, a token decoded in a middleware), or authenticate in a ' +
  'global guard registered before the module';

/** Whether `handler` or its class has `@UseGuards` of its own, besides the module's guard. */
function hasOwnGuards(type: object, handler: object): boolean {
  return [type, handler].some((target) =>
    ((Reflect.getMetadata(NEST_METADATA.guards, target) as unknown[] | undefined) ?? []).some(
      (guard) => !isRateLimitGuard(guard),
    ),
  );
}

/**
 * The fields of `rate_limit.overload_enabled`: the process pool's settings a user tunes (ms;
 * `false` for a signal turned off) and the named pools, so a log shows the option took.
 */
function enabledLine({ pool, pools, defaultPriority }: OverloadSettings): Record<string, unknown> {
  const off = (ms: number) => (ms === Infinity ? false : ms);
  return {
    minLimit: pool.minLimit,
    maxLimit: pool.maxLimit,
    maxTurnMs: off(pool.maxTurnMs),
    maxEventLoopDelayMs: off(pool.maxEventLoopDelayMs),
    queueMs: pool.queueMs,
    defaultPriority,
    pools: [...pools.keys()],
  };
}

/**
 * Under the `overload` option only, at bootstrap: puts `RateLimitSettleInterceptor` first
 * among the interceptors of every class with a GraphQL, WebSocket or microservice handler
 * Nest guards, so that the slot of each of their calls is given back when its handler's
 * result settles (as `@ConcurrencyLimit` does for its own handlers); HTTP routes need none,
 * their response's end says when (`stages/shed.ts`), and a controller of HTTP routes alone
 * pays for no RxJS pipeline per request; reads every handler's `@Priority`,
 * `@SkipLoadShedding` and `@OverloadPool`, so an unknown pool fails the start, and warns
 * (`rate_limit.unenforced`, once per handler) of a `@Priority` function on a handler with
 * guards of its own, which it runs before; registers
 * the overload metrics; starts the windows and the event loop's watch, stopped at shutdown,
 * and says so in one `rate_limit.overload_enabled` line.
 *
 * The interceptors in a constructor: Nest reads them when it binds routes, gateways and
 * resolvers, after providers exist.
 */
export class OverloadSetup implements OnModuleInit, OnApplicationShutdown {
  constructor(
    @Inject(DiscoveryService) discovery: DiscoveryService,
    @Inject(MetadataScanner) scanner: MetadataScanner,
    @Inject(RoutePlanner) private readonly planner: RoutePlanner,
  ) {
    const overload = planner.overload;
    if (overload === undefined) return;
    const settler = new RateLimitSettleInterceptor();
    const seen = new Set<unknown>();
    const controllers = new Set(discovery.getControllers().map((w) => w.metatype));
    for (const { metatype } of [...discovery.getControllers(), ...discovery.getProviders()]) {
      if (typeof metatype !== 'function' || seen.has(metatype)) continue;
      seen.add(metatype);
      const prototype = metatype.prototype as Record<string, unknown> | undefined;
      if (typeof prototype !== 'object' || prototype === null) continue;
      let settles = false;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const method = prototype[name];
        if (typeof method !== 'function') continue;
        const kind = handlerKind(metatype, method, controllers.has(metatype));
        if (kind === undefined) continue;
        if (kind !== 'http') settles = true;
        const route = overload.routes.route(metatype, method);
        if (typeof route.priority === 'function' && hasOwnGuards(metatype, method)) {
          planner.events.unenforced({ route: route.name, reason: PRIORITY_BEFORE_GUARDS });
        }
      }
      if (!settles) continue;
      const own = (Reflect.getOwnMetadata(NEST_METADATA.interceptors, metatype) ?? []) as unknown[];
      if (own[0] === RateLimitSettleInterceptor || own[0] instanceof RateLimitSettleInterceptor)
        continue;
      // An instance, not the class: Nest made the interceptors its scan of the modules found
      // before this runs, and leaves out, without a word, a class it has no instance of.
      Reflect.defineMetadata(
        NEST_METADATA.interceptors,
        [settler, ...own.filter((i) => i !== RateLimitSettleInterceptor)],
        metatype,
      );
    }
  }

  async onModuleInit(): Promise<void> {
    const overload = this.planner.overload;
    if (overload === undefined) return;
    overload.metrics = await createOverloadMetrics(
      this.planner.options.metrics,
      overload.protection,
    );
    overload.start();
    this.planner.events.overloadEnabled(enabledLine(overload.settings));
  }

  onApplicationShutdown(): void {
    this.planner.overload?.stop();
  }
}
