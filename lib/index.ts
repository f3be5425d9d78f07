export { formatRate, parseRate, type Rate, type RateInput } from './core/rate.js';
export {
  ALGORITHMS,
  resolvePolicy,
  type Algorithm,
  type Decision,
  type DenyReason,
  type Policy,
  type PolicyDecision,
  type PolicyAlgorithm,
  type PolicyInput,
} from './core/policy.js';
export { DEFAULT_LEASE_MS, type Lease } from './core/concurrency.js';
export {
  RateLimitBackendError,
  RateLimitConfigError,
  type BackendErrorKind,
  type RateLimitErrorCode,
} from './core/errors.js';
export type { KnownRefusal } from './core/decision.js';
export { controlKey, identityTag, policyKey } from './core/keys.js';
export {
  applicableOverride,
  readControl,
  type ControlEntries,
  type ExemptionEntry,
  type OverrideEntry,
} from './core/control.js';
export type {
  InspectedPolicy,
  InspectedState,
  InspectOptions,
  KnownPolicy,
} from './core/inspect.js';
export {
  definePolicy,
  RateLimiter,
  type ConsumeOptions,
  type Policies,
  type RateLimiterOptions,
  type Spending,
} from './core/limiter.js';
export type { StoreRefund } from './core/refund.js';
export type {
  ControlChange,
  ControlSnapshot,
  RateLimitStore,
  StoredKey,
  StoreOutcome,
  StorePolicy,
  StoreSnapshot,
} from './core/stores/store.js';
export { DenyCache, type DenyCacheOptions } from './core/deny-cache.js';
export { MemoryStore, type MemoryStoreOptions } from './core/stores/memory-store.js';
export { RedisStore, type RedisStoreOptions } from './core/stores/redis-store.js';
export {
  CircuitBreaker,
  type CircuitBreakerOptions,
  type CircuitState,
} from './core/circuit-breaker.js';
export type { LimitEntry } from './core/limiter.js';

// HTTP contract, framework-agnostic.
export { clientIp, normalizeIp, type IpOptions, type RequestLike } from './http/ip.js';
export {
  draft10Headers,
  legacyHeaders,
  rateLimitHeaders,
  retryAfterSeconds,
  STANDARD_DRAFTS,
  type HeaderOptions,
  type HeaderPolicy,
  type StandardDraft,
} from './http/headers.js';
export { draft6Headers, draft7Headers, draft11Headers } from './http/header-drafts.js';
export {
  PROBLEM_CONTENT_TYPE,
  QUOTA_EXCEEDED_TYPE,
  quotaExceededProblem,
  serviceUnavailableBody,
  TEMPORARY_REDUCED_CAPACITY_TYPE,
  temporaryReducedCapacityProblem,
  tooManyRequestsBody,
  type ProblemDetails,
  type ServiceUnavailableBody,
  type TooManyRequestsBody,
} from './http/responses.js';

// The Nest module.
export {
  byTier,
  ConcurrencyLimit,
  RateLimit,
  SkipRateLimit,
  type ConcurrencyLimitOptions,
  type CostFn,
  type RateFn,
  type RateLimitOptions,
} from './nest/declare/decorators.js';
export { keys, type KeyFn, type KeyHelpers } from './nest/declare/keys.js';
export {
  OverloadPool,
  Priority,
  SkipLoadShedding,
  type PriorityFn,
} from './nest/overload/decorators.js';
export {
  PRIORITIES,
  type AdaptiveLimitOptions,
  type AdmissionOptions,
  type OverloadOptions,
  type OverloadPoolOptions,
} from './core/overload/types.js';
export { rateLimitContext, type RateLimitContext } from './nest/declare/context.js';
export type { RequestOutcome } from './nest/pipeline/outcome.js';
export type { Refusal } from './nest/transports/refusal.js';
export type { Transport } from './nest/transports/transport.js';
export type { RpcRefusal } from './nest/transports/rpc.js';
export {
  ProblemDetailsFilter,
  RateLimitProblemException,
} from './nest/transports/problem-details.js';
export {
  graphQLRefusal,
  type GraphQLRefusalCode,
  type GraphQLRefusalExtensions,
} from './nest/transports/graphql.js';
export { rateLimitedSubscriptionsAsErrors } from './nest/transports/graphql-ws.js';
export type { GraphQLCostBudget, GraphQLCostOptions } from './nest/graphql/options.js';
export type { OperationCostExtension } from './nest/graphql/cost-extension.js';
export {
  recordHandshake,
  type HandshakeRequest,
  type WsRateLimitError,
} from './nest/transports/ws.js';
export type { ConnectionLimitOptions } from './nest/transports/ws-connection.js';
export {
  RATE_LIMIT_EVENTS,
  type BlockedDetail,
  type OverrideAppliedDetail,
  type RateLimitEventName,
  type UnenforcedDetail,
} from './nest/observability/events.js';
export type { MetricsOptions, MetricsRegistry } from './nest/observability/metrics.js';
export type {
  DecisionEvent,
  DecisionEventPolicy,
  DecisionOutcome,
} from './nest/observability/observer.js';
export type {
  DefaultPolicy,
  RateLimitModuleAsyncOptions,
  RateLimitModuleOptions,
} from './nest/module/options.js';
export { RateLimitGuard } from './nest/pipeline/rate-limit.guard.js';
export { RateLimitInterceptor } from './nest/pipeline/rate-limit.interceptor.js';
export { RateLimitSettleInterceptor } from './nest/pipeline/settle.interceptor.js';
export { RateLimitModule } from './nest/module/rate-limit.module.js';
export {
  RateLimitService,
  type ExemptionOptions,
  type OverrideOptions,
} from './nest/operations/rate-limit.service.js';
export {
  RateLimitAdminModule,
  type RateLimitAdminOptions,
} from './nest/operations/rate-limit-admin.module.js';
export { RATE_LIMIT_OPTIONS, RATE_LIMIT_REDIS } from './nest/module/tokens.js';
