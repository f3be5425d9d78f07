/**
 * `nest-rate-limit`: the NestJS module (decorators, guard, service, admin endpoints) and the
 * engine it runs on, usable without Nest (`RateLimiter` over a `RedisStore`, a `MemoryStore`
 * or your own `RateLimitStore`). Every name exported here is a semver promise, checked by
 * `npm run lint:api` against `api/nest-rate-limit.api.md`: a helper the module uses inside
 * stays out of this list.
 */

// The engine, usable without Nest (docs/guides/engine-without-nest.md).
export type { Rate, RateInput } from './core/model/rate.js';
export type {
  Algorithm,
  Decision,
  DenyReason,
  Policy,
  PolicyDecision,
  PolicyAlgorithm,
  PolicyInput,
} from './core/model/policy.js';
export {
  RateLimitBackendError,
  RateLimitConfigError,
  type BackendErrorKind,
  type RateLimitErrorCode,
} from './core/errors.js';
export type { KnownRefusal } from './core/model/decision.js';
export type {
  InspectedPolicy,
  InspectedState,
  InspectOptions,
  KnownPolicy,
} from './core/operator/inspect.js';
export {
  definePolicy,
  RateLimiter,
  type ConsumeOptions,
  type LimitEntry,
  type Policies,
  type RateLimiterOptions,
  type Spending,
} from './core/limiter.js';
export type { State } from './core/algorithms/types.js';
export type { CircuitBreakerOptions, CircuitState } from './core/call/circuit-breaker.js';
export type { DenyCacheOptions } from './core/call/deny-cache.js';
export { MemoryStore, type MemoryStoreOptions } from './core/stores/memory/memory-store.js';
export { RedisStore, type RedisStoreOptions } from './core/stores/redis/redis-store.js';
// The store's contract, to bring a store of your own (`store` of the module or the engine).
export type {
  ControlChange,
  ControlSnapshot,
  Lease,
  RateLimitStore,
  StoredKey,
  StoreOutcome,
  StorePolicy,
  StoreRefund,
  StoreSnapshot,
} from './core/stores/store.js';

// The HTTP contract's shapes, as the module's options and refusals carry them.
export type { HeaderOptions, HeaderPolicy, StandardDraft } from './http/headers.js';
export type {
  ProblemDetails,
  ServiceUnavailableBody,
  TooManyRequestsBody,
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
export type { StoreFailureMode } from './nest/declare/policy-options.js';
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
  DefaultPolicyOptions,
  RateLimitModuleAsyncOptions,
  RateLimitModuleOptions,
} from './nest/module/options.js';
export { RateLimitGuard } from './nest/pipeline/rate-limit.guard.js';
export { RateLimitSettleInterceptor } from './nest/end/settle.interceptor.js';
export { RateLimitModule } from './nest/module/rate-limit.module.js';
export {
  RateLimitService,
  type ExemptionOptions,
  type OverrideOptions,
} from './nest/operations/rate-limit.service.js';
export type { RemovalOptions } from './nest/operations/control-changes.js';
export type { ControlEntries, ExemptionEntry, OverrideEntry } from './core/operator/control.js';
export {
  RateLimitAdminModule,
  type RateLimitAdminOptions,
} from './nest/operations/rate-limit-admin.module.js';
export { RATE_LIMIT_REDIS } from './nest/module/tokens.js';
