import { Inject, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { NEST_METADATA } from '../declare/metadata.js';
import { handlerKind } from '../module/handlers.js';
import { createOverloadMetrics } from '../observability/overload-metrics.js';
import { RoutePlanner } from '../plan/planner.js';
import { RateLimitSettleInterceptor } from '../pipeline/settle.interceptor.js';

/**
 * Under the `overload` option only, at bootstrap: puts `RateLimitSettleInterceptor` first
 * among the interceptors of every class with a handler Nest guards, so that every call's
 * slot is given back when its handler's result settles, on every transport (as
 * `@ConcurrencyLimit` does for its own handlers); reads every handler's `@Priority`,
 * `@SkipLoadShedding` and `@OverloadPool`, so an unknown pool fails the start; registers
 * the overload metrics; starts the windows and the event loop's watch, stopped at shutdown.
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
    const seen = new Set<unknown>();
    const controllers = new Set(discovery.getControllers().map((w) => w.metatype));
    for (const { metatype } of [...discovery.getControllers(), ...discovery.getProviders()]) {
      if (typeof metatype !== 'function' || seen.has(metatype)) continue;
      seen.add(metatype);
      const prototype = metatype.prototype as Record<string, unknown> | undefined;
      if (typeof prototype !== 'object' || prototype === null) continue;
      let guarded = false;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const method = prototype[name];
        if (typeof method !== 'function') continue;
        if (handlerKind(metatype, method, controllers.has(metatype)) === undefined) continue;
        guarded = true;
        overload.routes.route(metatype, method);
      }
      if (!guarded) continue;
      const own = (Reflect.getOwnMetadata(NEST_METADATA.interceptors, metatype) ?? []) as unknown[];
      if (own[0] === RateLimitSettleInterceptor) continue;
      Reflect.defineMetadata(
        NEST_METADATA.interceptors,
        [RateLimitSettleInterceptor, ...own.filter((i) => i !== RateLimitSettleInterceptor)],
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
  }

  onApplicationShutdown(): void {
    this.planner.overload?.stop();
  }
}
