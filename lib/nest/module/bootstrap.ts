import { Inject, Optional, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import {
  APP_GUARD,
  ApplicationConfig,
  DiscoveryService,
  MetadataScanner,
  ModulesContainer,
} from '@nestjs/core';
import { appendAfterRouteGuards, isRateLimitGuard } from '../pipeline/stages/after-route-guards.js';
import type { RateLimitEvents } from '../observability/events.js';
import {
  scanHandlers,
  sharedBudgetReason,
  type Handler,
  type RpcServer,
  type Scanned,
} from './handlers.js';
import { keys } from '../declare/keys.js';
import { release, RESOURCES } from './lifecycle.js';
import { RateLimitGuard } from '../pipeline/rate-limit.guard.js';
import type { Resources } from './resources.js';
import { RoutePlanner } from '../plan/planner.js';
import { controllerHandlers } from './controller-handlers.js';
import { budgetBeforeGuardsReason, userBeforeGuardsReason } from './user-before-guards.js';
import type { OperationCosts } from '../graphql/operation-costs.js';
import { OPERATION_COSTS } from '../graphql/tokens.js';
import { isLimitedType } from '../transports/registry.js';

/*
 * What the module does at bootstrap, besides building its providers: checks every handler's
 * policies and reports those that will never run (RouteCheck), appends the guard that decides
 * per-user policies after a route's own guards (AfterGuardsSetup), and stands its guard aside
 * for a subclass registered as a global guard of the app's (GuardCheck).
 */

/** A controller or provider as `DiscoveryService` lists it. */
type InstanceWrapper = ReturnType<DiscoveryService['getProviders']>[number];

/** `getRpcTargetRegistry()` of Nest's `ModulesContainer` (Nest 10.2 and later). */
type RpcTargets = {
  getRpcTargetRegistry?: () => {
    subscribe(next: (server: RpcServer) => void): { unsubscribe(): void };
  };
};

/**
 * At bootstrap: resolves the policies of every handler Nest will guard (HTTP routes,
 * resolvers, gateway messages, message patterns), so a misconfiguration fails the start, not
 * a request; a start that fails closes what the module opened. Then reports, once per
 * handler, every `@RateLimit` that will never be enforced as written (`rate_limit.unenforced`),
 * including RPC handlers whose callers would share one budget on a microservice server
 * connected now or later.
 */
export class RouteCheck implements OnModuleInit, OnApplicationShutdown {
  private servers: { unsubscribe(): void } | undefined;

  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) private readonly scanner: MetadataScanner,
    @Inject(ModulesContainer) private readonly modules: ModulesContainer,
    @Inject(RoutePlanner) private readonly runtime: RoutePlanner,
    @Inject(RESOURCES) private readonly resources: Resources,
    @Inject(RateLimitGuard) private readonly own: RateLimitGuard,
    @Inject(ApplicationConfig) private readonly config: ApplicationConfig,
    @Optional() @Inject(OPERATION_COSTS) private readonly costs?: OperationCosts | null,
  ) {}

  async onModuleInit(): Promise<void> {
    const events = this.runtime.events;
    let scan: ReturnType<typeof scanHandlers>;
    try {
      const classes: Scanned[] = [];
      for (const { metatype } of this.discovery.getControllers()) {
        if (typeof metatype === 'function') classes.push({ type: metatype, controller: true });
      }
      // Every controller method, as before handlers of other kinds were known.
      for (const { type, handler } of controllerHandlers(this.discovery, this.scanner)) {
        this.runtime.routeOf(type, handler);
      }
      const providers = this.discovery.getProviders();
      for (const wrapper of providers) {
        const type = providerClass(wrapper);
        if (type !== undefined) classes.push({ type, controller: false });
      }
      scan = scanHandlers(classes, {
        methodNames: (prototype) => this.scanner.getAllMethodNames(prototype),
        limited: isLimitedType,
        fieldGuards: fieldGuards(providers),
      });
      for (const { type, method } of scan.handlers) this.runtime.routeOf(type, method);
    } catch (error) {
      this.runtime.close();
      await release(this.resources);
      throw error;
    }
    for (const detail of scan.unenforced) events.unenforced(detail);
    // Resolvers and gateways cannot wait for the guards that set the user, as routes do.
    const later = appGuardsAfter(this.config, this.discovery, this.own);
    for (const handler of scan.handlers) {
      const route = this.runtime.routeOf(handler.type, handler.method);
      const reason = userBeforeGuardsReason(handler, route, later);
      if (reason !== undefined) events.unenforced({ route: handler.route, reason });
    }
    // The budget is charged before execution, so before every guard, global ones too.
    const guarded = later || globalGuardsAfter(this.config, undefined);
    const budget = this.costs && budgetBeforeGuardsReason(scan.handlers, this.costs.rules, guarded);
    if (budget) events.unenforced({ route: 'GraphQL operation', reason: budget });
    this.watchRpcServers(scan.handlers, events);
  }

  onApplicationShutdown(): void {
    this.servers?.unsubscribe();
    this.runtime.close();
  }

  /** Reports RPC handlers keyed by address on each microservice server that gives none. */
  private watchRpcServers(handlers: readonly Handler[], events: RateLimitEvents): void {
    const byAddress = handlers.filter(({ type, method, kind }) => {
      if (kind !== 'rpc') return false;
      const { enforced, shadowed } = this.runtime.routeOf(type, method);
      return [...enforced, ...shadowed].some((r) => r.key === keys.userOrIp || r.key === keys.ip);
    });
    const registry = (this.modules as RpcTargets).getRpcTargetRegistry?.();
    if (byAddress.length === 0 || registry === undefined) return;
    const reported = new Set<string>();
    this.servers = registry.subscribe((server) => {
      for (const { route, method } of byAddress) {
        if (reported.has(route)) continue;
        const reason = sharedBudgetReason(method, server);
        if (reason === undefined) continue;
        reported.add(route);
        events.unenforced({ route, reason });
      }
    });
  }
}

/* eslint-disable @typescript-eslint/no-unsafe-function-type -- provider classes of any shape */

/** The class of a provider: its own for a class provider, its instance's for the others. */
function providerClass(wrapper: InstanceWrapper): Function | undefined {
  if (typeof wrapper.metatype === 'function' && (wrapper.inject ?? undefined) === undefined)
    return wrapper.metatype;
  const instance: unknown = wrapper.instance;
  if (typeof instance !== 'object' || instance === null) return undefined;
  const type: unknown = instance.constructor;
  return typeof type === 'function' && type !== Object ? type : undefined;
}

/* eslint-enable @typescript-eslint/no-unsafe-function-type */

/**
 * Whether GraphQL field resolvers run guards: `fieldResolverEnhancers` of the
 * `GqlModuleOptions` provider (`GRAPHQL_MODULE_OPTIONS` of `@nestjs/graphql`); undefined
 * without one.
 */
function fieldGuards(providers: readonly InstanceWrapper[]): boolean | undefined {
  const options = providers.find((w) => w.token === 'GqlModuleOptions')?.instance as
    { fieldResolverEnhancers?: unknown } | undefined;
  if (typeof options !== 'object' || options === null) return undefined;
  const enhancers = options.fieldResolverEnhancers;
  return Array.isArray(enhancers) && enhancers.includes('guards');
}

/**
 * Appends the guard that decides per-user policies to every HTTP route authenticated after
 * the module's guard (see `pipeline/stages/after-route-guards.ts`): at once, the routes with guards
 * of their own (in a constructor, as Nest reads a route's guards when it builds its router,
 * after providers exist and before `onModuleInit`); then, from `RateLimitModule.configure`,
 * which Nest calls after `app.useGlobalGuards` and before it builds its router, every HTTP
 * route when the app runs global guards after the module's (an `APP_GUARD` of a module
 * imported after `RateLimitModule`, or `app.useGlobalGuards`), so that module order never
 * turns per-user limits into per-address ones. A route whose policies are invalid is left
 * alone here: {@link RouteCheck} reports it.
 */
export class AfterGuardsSetup {
  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) private readonly scanner: MetadataScanner,
    @Inject(RoutePlanner) private readonly runtime: RoutePlanner,
    @Inject(RateLimitGuard) private readonly own: RateLimitGuard,
    @Inject(ApplicationConfig) private readonly config: ApplicationConfig,
  ) {
    this.appendToRoutes();
  }

  /** The app's global guards as they stand: each HTTP route waits for those after ours. */
  afterGlobalGuards(): void {
    if (!appGuardsAfter(this.config, this.discovery, this.own)) return;
    this.runtime.behindGlobalGuards();
    this.appendToRoutes();
  }

  private appendToRoutes(): void {
    for (const { type, handler } of controllerHandlers(this.discovery, this.scanner)) {
      try {
        if (this.runtime.routeOf(type, handler).afterGuards) appendAfterRouteGuards(handler);
      } catch {
        // Reported by RouteCheck, which also releases what the module opened.
      }
    }
  }
}

/**
 * Whether Nest runs a global guard of the app's after the guard that decides: the module's
 * guard `own`, or the app's `RateLimitGuard` subclass it stands aside for. False when the
 * module's guard is not global.
 */
function appGuardsAfter(
  config: ApplicationConfig,
  discovery: DiscoveryService,
  own: RateLimitGuard,
): boolean {
  return globalGuardsAfter(config, appGuardSubclass(discovery, own) ?? own);
}

/**
 * Whether Nest runs a global guard of the app's after `deciding` (the module's guard, or the
 * app's subclass it stands aside for; any position when undefined): a static one after it,
 * or any request-scoped one (run after every static one). The guards of this package do not
 * count.
 */
function globalGuardsAfter(
  config: ApplicationConfig,
  deciding: RateLimitGuard | undefined,
): boolean {
  const guards = config.getGlobalGuards() as unknown[];
  const at = deciding === undefined ? -1 : guards.findIndex((g) => sameGuard(g, deciding));
  if (deciding !== undefined && at === -1) return false;
  if (guards.slice(at + 1).some((guard) => !isRateLimitGuard(guard))) return true;
  const scoped = (config.getGlobalRequestGuards?.() ?? []) as { metatype?: unknown }[];
  return scoped.some((wrapper) => !isRateLimitGuard(wrapper.metatype));
}

/**
 * When the app registers a subclass of `RateLimitGuard` as a global guard of its own, the
 * module's guard (which Nest runs first) stands aside, so the subclass decides.
 */
export class GuardCheck implements OnModuleInit {
  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(RateLimitGuard) private readonly own: RateLimitGuard,
  ) {}

  onModuleInit(): void {
    this.own.standAside = appGuardSubclass(this.discovery, this.own) !== undefined;
  }
}

/**
 * The app's own global `RateLimitGuard` subclass, other than the module's guard `own`, if it
 * registered one. Nest keeps each APP_GUARD under a token of its own: "APP_GUARD (UUID: …)".
 */
export function appGuardSubclass(
  discovery: DiscoveryService,
  own: RateLimitGuard,
): RateLimitGuard | undefined {
  return discovery
    .getProviders()
    .find(
      ({ token, instance }) =>
        typeof token === 'string' &&
        token.startsWith(APP_GUARD) &&
        instance instanceof RateLimitGuard &&
        !sameGuard(instance, own),
    )?.instance as RateLimitGuard | undefined;
}

/**
 * Whether `guard` is `own`, or an instance of exactly its class. Nest's `instrument` option
 * (`NestFactory.create(AppModule, { instrument })`, which `@nestjs/observe` and the apps
 * `nest new` makes use) may hand every provider out wrapped, and a `useExisting` alias such as
 * the module's APP_GUARD wrapped once more, so one guard reaches us as several objects: a Proxy
 * of it, or an object delegating to it (`Object.create(instance)`). Both still answer the
 * instance's `constructor`, which tells them apart from an app's subclass.
 */
function sameGuard(guard: unknown, own: RateLimitGuard): boolean {
  return (
    guard === own ||
    (guard instanceof RateLimitGuard && guard.constructor === (own as object).constructor)
  );
}
