import { ApolloOperationCostPlugin } from '../graphql/apollo-plugin.js';
import { loadGraphQL } from '../graphql/load-graphql.js';
import { MercuriusOperationCostHooks } from '../graphql/mercurius-hooks.js';
import { OperationCostGuard } from '../graphql/operation-cost.guard.js';
import { GraphQLServerOptions } from '../graphql/server-options.js';
import { OperationCosts } from '../graphql/operation-costs.js';
import { OPERATION_COSTS } from '../graphql/tokens.js';
import {
  Inject,
  Module,
  Optional,
  type DynamicModule,
  type NestModule,
  type Provider,
  type Type,
} from '@nestjs/common';
import { APP_FILTER, APP_GUARD, DiscoveryModule } from '@nestjs/core';
import { quote, RateLimitConfigError } from '../../core/errors.js';
import { RateLimiter } from '../../core/limiter.js';
import { RateLimitEvents } from '../observability/events.js';
import type { RateLimitModuleAsyncOptions, RateLimitModuleOptions } from './options.js';
import { ProblemDetailsFilter } from '../transports/problem-details.js';
import { RateLimitGuard } from '../pipeline/rate-limit.guard.js';
import { RateLimitService } from '../operations/rate-limit.service.js';
import { createResources, type Resources } from './resources.js';
import { RoutePlanner } from '../plan/planner.js';
import { InstanceCount } from './instances.js';
import { MemoryStore } from '../../core/stores/memory/memory-store.js';
import { RATE_LIMIT_OPTIONS, RATE_LIMIT_REDIS } from './tokens.js';
import { AfterGuardsSetup, GuardCheck, RouteCheck } from './bootstrap.js';
import { BeforeBodySetup } from './before-body-setup.js';
import { InterceptorOrder } from '../end/interceptor-order.js';
import { OverloadSetup } from '../overload/setup.js';
import { RESOURCES, Shutdown } from './lifecycle.js';

/**
 * Rate limiting for a Nest app: a store, a global guard and a global interceptor
 * (see docs/reference/module-options.md). Import it once, in the root module.
 *
 * ```ts
 * RateLimitModule.forRoot({ redis: process.env.REDIS_URL, default: '1000/h' })
 * ```
 */
@Module({})
export class RateLimitModule implements NestModule {
  constructor(
    @Optional() @Inject(AfterGuardsSetup) private readonly afterGuards?: AfterGuardsSetup,
  ) {}

  /**
   * Called by Nest once the app's global guards are all known and before it builds its
   * routes: per-user policies then wait for global guards registered after the module's.
   * Applies no middleware.
   */
  configure(): void {
    this.afterGuards?.afterGlobalGuards();
  }

  /** @throws {RateLimitConfigError} at bootstrap, for any invalid option or route policy */
  static forRoot(options: RateLimitModuleOptions): DynamicModule {
    return build(
      { provide: RATE_LIMIT_OPTIONS, useValue: options },
      [],
      options?.global !== false,
      guardOf(options?.guard, 'RateLimitModule.forRoot'),
      // A global guard costs every call of the app a turn: only where it has work.
      options?.graphql !== undefined,
    );
  }

  /** Options from other providers, e.g. `ConfigService`. */
  static forRootAsync(options: RateLimitModuleAsyncOptions): DynamicModule {
    const factory = options.useFactory as (...args: unknown[]) => unknown;
    const provider: Provider = {
      provide: RATE_LIMIT_OPTIONS,
      // `global` and `guard` shape the module before the factory runs: from it, they would
      // be ignored without a word.
      useFactory: async (...args: unknown[]) => {
        const built = (await factory(...args)) as RateLimitModuleOptions;
        for (const option of ['global', 'guard'] as const) {
          if (built !== null && typeof built === 'object' && built[option] !== undefined) {
            throw new RateLimitConfigError(
              'ERR_RATE_LIMIT_OPTION',
              `${option} returned by useFactory is ignored: give it to forRootAsync({ ${option}, useFactory })`,
              'RateLimitModule.forRootAsync',
            );
          }
        }
        return built;
      },
      inject: (options.inject ?? []) as never[],
    };
    return build(
      provider,
      (options.imports ?? []) as never[],
      options.global !== false,
      guardOf(options.guard, 'RateLimitModule.forRootAsync'),
      // The options are not known yet: it passes every call at once when they have no `graphql`.
      true,
    );
  }
}

/**
 * The guard class to register globally: the module's own, or the `guard` option's subclass.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION` for anything but a subclass
 */
function guardOf(guard: unknown, where: string): Type<RateLimitGuard> {
  if (guard === undefined || guard === RateLimitGuard) return RateLimitGuard;
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
  operationGuard: boolean,
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
            maxWaitMs: o.maxWaitMs,
            circuitBreaker: o.circuitBreaker,
            denyCache: o.denyCache,
          });
          r.metrics?.watchCircuit(() => limiter.circuitState);
          return limiter;
        },
        inject: [RESOURCES, RATE_LIMIT_OPTIONS],
      },
      // One per module: every log line and its throttle ("once per 10 s") is the module's.
      { provide: RateLimitEvents, useValue: new RateLimitEvents() },
      {
        provide: RoutePlanner,
        useFactory: (
          limiter: RateLimiter,
          o: RateLimitModuleOptions,
          r: Resources,
          events: RateLimitEvents,
        ) =>
          new RoutePlanner(
            limiter,
            o,
            events,
            new InstanceCount(
              o.instances,
              r.client,
              r.store instanceof MemoryStore,
              `${o.prefix ?? 'rl'}:instances`,
              o.announceIntervalMs,
            ),
            r.metrics,
            r.tracing,
            global,
          ),
        inject: [RateLimiter, RATE_LIMIT_OPTIONS, RESOURCES, RateLimitEvents],
      },
      {
        provide: OPERATION_COSTS,
        useFactory: async (planner: RoutePlanner, o: RateLimitModuleOptions) =>
          o.graphql === undefined
            ? null
            : new OperationCosts(planner, o.graphql, await loadGraphQL()),
        inject: [RoutePlanner, RATE_LIMIT_OPTIONS],
      },
      ApolloOperationCostPlugin,
      MercuriusOperationCostHooks,
      GraphQLServerOptions,
      ...(operationGuard
        ? [OperationCostGuard, { provide: APP_GUARD, useExisting: OperationCostGuard }]
        : []),
      RateLimitService,
      RateLimitGuard,
      RouteCheck,
      GuardCheck,
      ...(global ? [AfterGuardsSetup] : []),
      InterceptorOrder,
      OverloadSetup,
      BeforeBodySetup,
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
      RoutePlanner,
      RateLimitEvents,
    ],
  };
}
