import {
  Inject,
  Module,
  type DynamicModule,
  type OnApplicationShutdown,
  type OnModuleInit,
  type Provider,
  type Type,
} from '@nestjs/common';
import {
  APP_FILTER,
  APP_GUARD,
  DiscoveryModule,
  DiscoveryService,
  MetadataScanner,
  ModulesContainer,
} from '@nestjs/core';
import { quote, RateLimitConfigError } from '../core/errors.js';
import { RateLimiter } from '../core/limiter.js';
import { appendAfterRouteGuards } from './after-guards.js';
import { RateLimitEvents } from './events.js';
import {
  scanHandlers,
  sharedBudgetReason,
  type Handler,
  type RpcServer,
  type Scanned,
} from './handlers.js';
import { keys } from './keys.js';
import type { RateLimitModuleAsyncOptions, RateLimitModuleOptions } from './options.js';
import { ProblemDetailsFilter } from './problem-details.js';
import { RateLimitGuard } from './rate-limit.guard.js';
import { RateLimitInterceptor } from './rate-limit.interceptor.js';
import { RateLimitService } from './rate-limit.service.js';
import { createResources, type Resources } from './resources.js';
import { RateLimitRuntime } from './runtime.js';
import { RATE_LIMIT_OPTIONS, RATE_LIMIT_REDIS } from './tokens.js';
import { isLimitedType } from './transports/registry.js';

const RESOURCES = Symbol('RATE_LIMIT_RESOURCES');

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
class RouteCheck implements OnModuleInit, OnApplicationShutdown {
  private servers: { unsubscribe(): void } | undefined;

  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) private readonly scanner: MetadataScanner,
    @Inject(ModulesContainer) private readonly modules: ModulesContainer,
    @Inject(RateLimitRuntime) private readonly runtime: RateLimitRuntime,
    @Inject(RESOURCES) private readonly resources: Resources,
  ) {}

  async onModuleInit(): Promise<void> {
    const events = new RateLimitEvents();
    let scan: ReturnType<typeof scanHandlers>;
    try {
      const classes: Scanned[] = [];
      for (const { metatype } of this.discovery.getControllers()) {
        if (typeof metatype !== 'function') continue;
        classes.push({ type: metatype, controller: true });
        // Every controller method, as before handlers of other kinds were known.
        const prototype = metatype.prototype as Record<string, unknown>;
        for (const name of this.scanner.getAllMethodNames(prototype)) {
          const handler = prototype[name];
          if (typeof handler === 'function') this.runtime.routeOf(metatype, handler);
        }
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
      await release(this.resources);
      throw error;
    }
    for (const detail of scan.unenforced) events.unenforced(detail);
    this.watchRpcServers(scan.handlers, events);
  }

  onApplicationShutdown(): void {
    this.servers?.unsubscribe();
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
 * Appends the guard that decides per-user policies to every HTTP route that authenticates
 * with guards of its own (see `after-guards.ts`). In a constructor, because Nest reads a
 * route's guards when it builds its router, after providers exist and before `onModuleInit`.
 * A route whose policies are invalid is left alone here: {@link RouteCheck} reports it.
 */
class AfterGuardsSetup {
  constructor(
    @Inject(DiscoveryService) discovery: DiscoveryService,
    @Inject(MetadataScanner) scanner: MetadataScanner,
    @Inject(RateLimitRuntime) runtime: RateLimitRuntime,
  ) {
    for (const { metatype } of discovery.getControllers()) {
      if (typeof metatype !== 'function') continue;
      const prototype = metatype.prototype as Record<string, unknown>;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const handler = prototype[name];
        if (typeof handler !== 'function') continue;
        try {
          if (runtime.routeOf(metatype, handler).afterGuards) appendAfterRouteGuards(handler);
        } catch {
          // Reported by RouteCheck, which also releases what the module opened.
        }
      }
    }
  }
}

/**
 * When the app registers a subclass of `RateLimitGuard` as a global guard of its own, the
 * module's guard (which Nest runs first) stands aside, so the subclass decides.
 */
class GuardCheck implements OnModuleInit {
  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(RateLimitGuard) private readonly own: RateLimitGuard,
  ) {}

  onModuleInit(): void {
    // Nest keeps each APP_GUARD under a token of its own: "APP_GUARD (UUID: …)".
    this.own.standAside = this.discovery
      .getProviders()
      .some(
        ({ token, instance }) =>
          typeof token === 'string' &&
          token.startsWith(APP_GUARD) &&
          instance instanceof RateLimitGuard &&
          instance !== this.own,
      );
  }
}

/** Closes what the module created, and only that. */
class Shutdown implements OnApplicationShutdown {
  constructor(@Inject(RESOURCES) private readonly resources: Resources) {}

  onApplicationShutdown(): Promise<void> {
    return release(this.resources);
  }
}

/** Each release, so a second (a failed start, then `app.close()`) waits on the first. */
const releases = new WeakMap<Resources, Promise<void>>();

/** Closes what the module created, once however often it is asked. */
function release(resources: Resources): Promise<void> {
  let done = releases.get(resources);
  if (done === undefined) releases.set(resources, (done = releaseOnce(resources)));
  return done;
}

async function releaseOnce({
  client,
  ownsClient,
  store,
  ownsStore,
  metrics,
}: Resources): Promise<void> {
  // Unregistered, so the next app in this process (tests, hot reload) can register them again.
  metrics?.remove();
  // QUIT needs a live connection; without one, disconnect at once rather than wait on it.
  // Not once ended (a failed start releases, then app.close() again): ioredis would arm a
  // 2 s timer to destroy a socket already gone, keeping the process alive that long.
  if (ownsClient && client) {
    if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
    else if (client.status !== 'end') client.disconnect();
  }
  if (ownsStore) await store.close?.();
}

/**
 * Rate limiting for a Nest app: a store, a global guard and a global interceptor
 * (DESIGN §6). Import it once, in the root module.
 *
 * ```ts
 * RateLimitModule.forRoot({ redis: process.env.REDIS_URL, default: '1000/h' })
 * ```
 */
@Module({})
export class RateLimitModule {
  /** @throws {RateLimitConfigError} at bootstrap, for any invalid option or route policy */
  static forRoot(options: RateLimitModuleOptions): DynamicModule {
    return build(
      { provide: RATE_LIMIT_OPTIONS, useValue: options },
      [],
      options?.global !== false,
      guardOf(options?.guard, 'RateLimitModule.forRoot'),
    );
  }

  /** Options from other providers, e.g. `ConfigService`. */
  static forRootAsync(options: RateLimitModuleAsyncOptions): DynamicModule {
    const provider: Provider = {
      provide: RATE_LIMIT_OPTIONS,
      useFactory: options.useFactory as (...args: unknown[]) => unknown,
      inject: (options.inject ?? []) as never[],
    };
    return build(
      provider,
      (options.imports ?? []) as never[],
      options.global !== false,
      guardOf(options.guard, 'RateLimitModule.forRootAsync'),
    );
  }
}

/**
 * The guard class to register globally: the module's own, or the `guard` option's subclass.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION` for anything but a subclass
 */
function guardOf(guard: unknown, where: string): Type<RateLimitGuard> {
  if (guard === undefined) return RateLimitGuard;
  if (typeof guard === 'function' && guard.prototype instanceof RateLimitGuard) {
    return guard as Type<RateLimitGuard>;
  }
  throw new RateLimitConfigError(
    'ERR_RATE_LIMIT_OPTION',
    `invalid guard ${typeof guard === 'function' ? guard.name || 'anonymous' : quote(guard)}: expected a class that extends RateLimitGuard`,
    where,
  );
}

function build(
  optionsProvider: Provider,
  imports: DynamicModule['imports'],
  global: boolean,
  guard: Type<RateLimitGuard>,
): DynamicModule {
  return {
    module: RateLimitModule,
    global: true,
    imports: [DiscoveryModule, ...(imports ?? [])],
    providers: [
      optionsProvider,
      { provide: RESOURCES, useFactory: createResources, inject: [RATE_LIMIT_OPTIONS] },
      { provide: RATE_LIMIT_REDIS, useFactory: (r: Resources) => r.client, inject: [RESOURCES] },
      {
        provide: RateLimiter,
        useFactory: (r: Resources, o: RateLimitModuleOptions) => {
          const limiter = new RateLimiter({
            store: r.store,
            prefix: o.prefix,
            timeoutMs: o.timeoutMs,
            circuitBreaker: o.circuitBreaker,
            denyCache: o.denyCache,
          });
          r.metrics?.watchCircuit(() => limiter.circuitState);
          return limiter;
        },
        inject: [RESOURCES, RATE_LIMIT_OPTIONS],
      },
      {
        provide: RateLimitRuntime,
        useFactory: (limiter: RateLimiter, o: RateLimitModuleOptions, r: Resources) =>
          new RateLimitRuntime(limiter, o, new RateLimitEvents(), r.metrics, r.tracing, global),
        inject: [RateLimiter, RATE_LIMIT_OPTIONS, RESOURCES],
      },
      RateLimitService,
      RateLimitGuard,
      RateLimitInterceptor,
      RouteCheck,
      GuardCheck,
      ...(global ? [AfterGuardsSetup] : []),
      Shutdown,
      // The guard writes the headers itself, so no global interceptor: one would wrap every
      // response in an RxJS pipeline for nothing (a quarter of the guard's cost on Fastify,
      // measured in bench/).
      ...(guard !== RateLimitGuard ? [guard] : []),
      ...(global ? [{ provide: APP_GUARD, useExisting: guard }] : []),
      // Catches only the refusals of errorFormat: 'problem', whichever guard raised them.
      { provide: APP_FILTER, useClass: ProblemDetailsFilter },
    ],
    exports: [
      RATE_LIMIT_OPTIONS,
      RATE_LIMIT_REDIS,
      RateLimiter,
      RateLimitService,
      RateLimitGuard,
      RateLimitInterceptor,
      RateLimitRuntime,
    ],
  };
}
