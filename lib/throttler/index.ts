// `nest-rate-limit/throttler`: the public API of @nestjs/throttler 6.7, on this package's
// engine. Change the import path; the rest of your code stays (see
// docs/guides/migrating-from-throttler.md).
export * from './options.js';
export { ThrottlerStorage, type ThrottlerStorageRecord } from './storage.js';
export {
  InjectThrottlerOptions,
  InjectThrottlerStorage,
  SkipThrottle,
  Throttle,
  type ThrottlerMethodOrControllerOptions,
} from './decorators.js';
export { ThrottlerException, throttlerMessage } from './exception.js';
export { ThrottlerGuard } from './guard.js';
export { ThrottlerModule } from './module.js';
export { getOptionsToken, getStorageToken } from './providers.js';
export { DEFAULT_SWEEP_INTERVAL, ThrottlerStorageService } from './memory-storage.js';
export { RateLimitRedisStorage, type RateLimitRedisStorageOptions } from './redis-storage.js';
export { EngineStorage, type ThrottlerHit } from './engine-storage.js';
export { seconds, minutes, hours, days, weeks } from './utilities.js';
export { DEFAULT_IPV6_SUBNET_PREFIX, normalizeIp } from './ip.js';
export {
  THROTTLER_BLOCK_DURATION,
  THROTTLER_KEY_GENERATOR,
  THROTTLER_LIMIT,
  THROTTLER_OPTIONS,
  THROTTLER_SKIP,
  THROTTLER_TRACKER,
  THROTTLER_TTL,
} from './constants.js';
