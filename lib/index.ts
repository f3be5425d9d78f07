export { parseRate, type Rate, type RateInput } from './core/rate.js';
export {
  ALGORITHMS,
  resolvePolicy,
  type Algorithm,
  type Decision,
  type DenyReason,
  type Policy,
  type PolicyDecision,
  type PolicyInput,
} from './core/policy.js';
export {
  RateLimitBackendError,
  RateLimitConfigError,
  type BackendErrorKind,
  type RateLimitErrorCode,
} from './core/errors.js';
export { identityTag, policyKey } from './core/keys.js';
export {
  definePolicy,
  RateLimiter,
  type ConsumeOptions,
  type Policies,
  type RateLimiterOptions,
} from './core/limiter.js';
export type { RateLimitStore, StoreOutcome, StorePolicy } from './core/stores/store.js';
export { MemoryStore, type MemoryStoreOptions } from './core/stores/memory-store.js';
export { RedisStore, type RedisStoreOptions } from './core/stores/redis-store.js';
