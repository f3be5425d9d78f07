import {
  Inject,
  Module,
  type DynamicModule,
  type OnApplicationShutdown,
  type OnModuleInit,
  type Provider,
} from '@nestjs/common';
import { APP_GUARD, DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { RateLimiter } from '../core/limiter.js';
import { RateLimitEvents } from './events.js';
import type { RateLimitModuleAsyncOptions, RateLimitModuleOptions } from './options.js';
import { RateLimitGuard } from './rate-limit.guard.js';
import { RateLimitInterceptor } from './rate-limit.interceptor.js';
import { RateLimitService } from './rate-limit.service.js';
import { createResources, type Resources } from './resources.js';
import { RateLimitRuntime } from './runtime.js';
import { RATE_LIMIT_OPTIONS, RATE_LIMIT_REDIS } from './tokens.js';

const RESOURCES = Symbol('RATE_LIMIT_RESOURCES');

/**
 * Resolves every route's policies at bootstrap, so a misconfiguration fails the start, not
 * a request; a start that fails closes what the module opened.
 */
class RouteCheck implements OnModuleInit {
  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) private readonly scanner: MetadataScanner,
    @Inject(RateLimitRuntime) private readonly runtime: RateLimitRuntime,
    @Inject(RESOURCES) private readonly resources: Resources,
  ) {}

  async onModuleInit(): Promise<void> {
    try {
      for (const { metatype } of this.discovery.getControllers()) {
        if (typeof metatype !== 'function') continue;
        const prototype = metatype.prototype as Record<string, unknown>;
        for (const name of this.scanner.getAllMethodNames(prototype)) {
          const handler = prototype[name];
          if (typeof handler === 'function') this.runtime.routeOf(metatype, handler);
        }
      }
    } catch (error) {
      await release(this.resources);
      throw error;
    }
  }
}

/** Closes what the module created, and only that. */
class Shutdown implements OnApplicationShutdown {
  constructor(@Inject(RESOURCES) private readonly resources: Resources) {}

  onApplicationShutdown(): Promise<void> {
    return release(this.resources);
  }
}

async function release({
  client,
  ownsClient,
  store,
  ownsStore,
  metrics,
}: Resources): Promise<void> {
  // Unregistered, so the next app in this process (tests, hot reload) can register them again.
  metrics?.remove();
  // QUIT needs a live connection; without one, disconnect at once rather than wait on it.
  if (ownsClient && client) {
    if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
    else client.disconnect();
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
    return build({ provide: RATE_LIMIT_OPTIONS, useValue: options }, [], options?.global !== false);
  }

  /** Options from other providers, e.g. `ConfigService`. */
  static forRootAsync(options: RateLimitModuleAsyncOptions): DynamicModule {
    const provider: Provider = {
      provide: RATE_LIMIT_OPTIONS,
      useFactory: options.useFactory as (...args: unknown[]) => unknown,
      inject: (options.inject ?? []) as never[],
    };
    return build(provider, (options.imports ?? []) as never[], options.global !== false);
  }
}

function build(
  optionsProvider: Provider,
  imports: DynamicModule['imports'],
  global: boolean,
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
          new RateLimitRuntime(limiter, o, new RateLimitEvents(), r.metrics, r.tracing),
        inject: [RateLimiter, RATE_LIMIT_OPTIONS, RESOURCES],
      },
      RateLimitService,
      RateLimitGuard,
      RateLimitInterceptor,
      RouteCheck,
      Shutdown,
      // The guard writes the headers itself, so no global interceptor: one would wrap every
      // response in an RxJS pipeline for nothing (a quarter of the guard's cost on Fastify,
      // measured in bench/).
      ...(global ? [{ provide: APP_GUARD, useExisting: RateLimitGuard }] : []),
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
