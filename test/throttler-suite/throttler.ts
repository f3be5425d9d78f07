/**
 * What the vendored suite imports in place of `@nestjs/throttler` (its `../src`): the drop-in,
 * `lib/throttler` (published as `nest-rate-limit/throttler`), unchanged, except that on the
 * Redis run (`runVendored('redis', …)`, see run.ts) `ThrottlerModule.forRoot` gives each app
 * a `RateLimitRedisStorage` on the harness's Redis, with a key prefix of its own, in place of
 * the in-memory default: the suite's apps then count in Redis, and no app sees another's
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
import { redisUrl } from '../harness/redis.js';
import { suiteStore } from './store.js';

export * from '../../lib/throttler/index.js';

const redisStorage: Provider = {
  provide: ThrottlerStorage,
  useFactory: () =>
    new RateLimitRedisStorage(redisUrl(), { prefix: `ts-${randomUUID().slice(0, 8)}` }),
};

function onSuiteStore(module: DynamicModule): DynamicModule {
  if (suiteStore() !== 'redis') return module;
  const swap = (p: Provider) =>
    typeof p === 'object' && 'provide' in p && p.provide === ThrottlerStorage ? redisStorage : p;
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
