/**
 * What the vendored suite imports in place of `@nestjs/throttler` (its `../src`): the drop-in,
 * `lib/throttler` (published as `nest-rate-limit/throttler`), unchanged, except that on the
 * Redis runs (`runVendored('redis' | 'cluster', …)`, see run.ts) `ThrottlerModule.forRoot`
 * gives each app a `RateLimitRedisStorage` on the harness's Redis (standalone or Cluster),
 * with a key prefix of its own, in place of the in-memory default: the suite's apps then count in Redis, and no app sees another's
 * counts (the suite expects a fresh storage per app, as the in-memory one is).
 */
import { randomUUID } from 'node:crypto';
import type { DynamicModule, Provider } from '@nestjs/common';
import {
  RateLimitRedisStorage,
  ThrottlerModule as DropInModule,
  ThrottlerStorage,
  type ThrottlerAsyncOptions,
  type ThrottlerModuleOptions,
} from '../../lib/throttler/index.js';
import { newCluster, redisUrl } from '../harness/redis.js';
import { suiteStore } from './store.js';

export * from '../../lib/throttler/index.js';

/**
 * The suite counts exactly: a call a loaded CI machine holds past the default 100 ms would be
 * admitted (fail-open) and read as a miscount (the flood test of throttler-regressions once
 * admitted 11 of limit 5 that way).
 */
const TIMEOUT_MS = 2000;

/** On a Redis Cluster client of its own, closed with the app (a client passed in is not). */
class ClusterStorage extends RateLimitRedisStorage {
  constructor(
    private readonly cluster = newCluster({
      retryDelayOnFailover: 0,
      redisOptions: { autoResendUnfulfilledCommands: false },
    }),
  ) {
    super(cluster, { prefix: `ts-${randomUUID().slice(0, 8)}`, timeoutMs: TIMEOUT_MS });
  }
  override async onApplicationShutdown(): Promise<void> {
    await super.onApplicationShutdown();
    await this.cluster.quit();
  }
}

const storages: Record<'redis' | 'cluster', Provider> = {
  redis: {
    provide: ThrottlerStorage,
    useFactory: () =>
      new RateLimitRedisStorage(redisUrl(), {
        prefix: `ts-${randomUUID().slice(0, 8)}`,
        timeoutMs: TIMEOUT_MS,
      }),
  },
  cluster: { provide: ThrottlerStorage, useFactory: () => new ClusterStorage() },
};

function onSuiteStore(module: DynamicModule): DynamicModule {
  const store = suiteStore();
  if (store === 'memory') return module;
  const swap = (p: Provider) =>
    typeof p === 'object' && 'provide' in p && p.provide === ThrottlerStorage ? storages[store] : p;
  return {
    ...module,
    providers: module.providers!.map(swap),
    exports: (module.exports as Provider[]).map(swap),
  };
}

/** The drop-in's module; on the Redis run, with a Redis storage per app (see above). */
export class ThrottlerModule {
  static forRoot(options?: ThrottlerModuleOptions): DynamicModule {
    return onSuiteStore(DropInModule.forRoot(options));
  }
  static forRootAsync(options: ThrottlerAsyncOptions): DynamicModule {
    return onSuiteStore(DropInModule.forRootAsync(options));
  }
}
