import type { DenyCacheOptions } from '../../core/deny-cache.js';
import type { CanActivate, ExecutionContext, Type } from '@nestjs/common';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { CircuitBreakerOptions } from '../../core/circuit-breaker.js';
import type { Algorithm, Decision } from '../../core/policy.js';
import type { RateInput } from '../../core/rate.js';
import type { RateLimitStore } from '../../core/stores/store.js';
import type { HeaderOptions } from '../../http/headers.js';
import type { RateFn, RateLimitOptions, StoreFailureMode } from '../declare/decorators.js';
import type { KeyFn } from '../declare/keys.js';
import type { GraphQLCostOptions } from '../graphql/options.js';
import type { MetricsOptions } from '../observability/metrics.js';
import type { DecisionEvent } from '../observability/observer.js';
import type { OverloadOptions } from '../../core/overload/types.js';

/** A module default given with options: `@RateLimit`'s options and its `rate`. */
export type DefaultPolicyOptions = RateLimitOptions & { rate: RateInput | RateFn };

/**
 * A module-wide default policy: a rate, a rate function, or a rate with `@RateLimit` options.
 * Its budget is global (one per identity across the API) unless it names a `scope`:
 * `scope: 'route'` gives each route a budget of its own, as `@nestjs/throttler` does.
 */
export type DefaultPolicy = RateInput | RateFn | DefaultPolicyOptions;

export type { StoreFailureMode };

/**
 * Options of `RateLimitModule.forRoot` (see docs/reference/module-options.md). Durations in
 * **ms**.
 */
export interface RateLimitModuleOptions {
  /**
   * Where state lives: a Redis URL, ioredis options (Sentinel too), or a `Redis` /
   * `Cluster` you own (the module never closes a client it did not create). A client the
   * module creates fails fast: no offline queue, no re-sent commands, no auto-pipelining.
   */
  redis?: string | RedisOptions | Redis | Cluster;
  /** Instead of `redis`: `'memory'` (per process) or your own store. Neither: memory, with a warning. */
  store?: 'memory' | RateLimitStore;
  /**
   * Policies on every route unless skipped or overridden by name: one, or a list with
   * distinct `name`s (`[{ name: 'short', rate: '3/s', scope: 'route' }, { name: 'long', rate:
   * '100/m', scope: 'route' }]`). Each is one budget per identity across the API (scope
   * `global`) unless it names a scope; `scope: 'route'` is a budget per route.
   */
  default?: DefaultPolicy | readonly DefaultPolicyOptions[];
  /** Algorithm of policies that name none. Default `'token-bucket'`. */
  algorithm?: Algorithm;
  /** Identity of policies that set no `key`. Default `keys.userOrIp`. */
  key?: KeyFn;
  /** First part of every Redis key. Default `'rl'`. */
  prefix?: string;
  /**
   * The `addressBurst` of policies that do not say (see {@link RateLimitOptions.addressBurst}):
   * how many requests of one address may wait on a route's own auth guards at once. An
   * integer >= 1. Default 20.
   */
  addressBurst?: number;
  /** Answer 503 when the store is unreachable, for policies that do not say. Default false (fail-open). Shorthand for `onStoreFailure: 'closed'`. */
  failClosed?: boolean;
  /**
   * What policies that do not say do while the store is unreachable, timing out or its
   * circuit breaker open: `'open'` admits (fail-open), `'closed'` answers 503 (fail-closed),
   * `'local'` enforces insurance limits, this process's share `ceil(limit / instances)` of
   * each policy, in memory, until the store answers again. Default: `'closed'` when
   * `failClosed`, else `'open'`.
   */
  onStoreFailure?: StoreFailureMode;
  /**
   * How many processes share the store: the insurance limit of a policy is
   * `ceil(limit / instances)`, at least 1. Given, it wins. Not given, each process learns it
   * from the store while the store is healthy (every `announceIntervalMs`, off the request
   * path) and keeps the last count through an outage; that needs the module's own Redis
   * client (`redis`), the memory store counts 1, and a custom `store` cannot be asked. A
   * process that has learned nothing (it never reached the store) admits 1 per period per
   * policy while the store fails: it cannot tell one peer from a hundred, so it takes the
   * smallest share rather than the whole limit. An integer >= 1.
   */
  instances?: number;
  /**
   * How often each process announces itself in the store to learn `instances`, in **ms**; an
   * announcement counts for three intervals, so a process that stops (or loses the store)
   * drops out of the others' count 20 to 30 s later by default. Only used when `instances` is
   * not given and a policy is `onStoreFailure: 'local'`. An integer from 10 to 2^31-1;
   * default 10,000.
   */
  announceIntervalMs?: number;
  /**
   * Longest wait for the store per request while it answers nothing, in **ms**. Default 100.
   * A store still answering other calls is behind, not down: see `maxWaitMs`.
   */
  timeoutMs?: number;
  /**
   * Longest wait for the store per request while it is behind (answering other calls, or
   * this process too busy to read its replies), in **ms**; such waits never open the
   * circuit breaker. At least `timeoutMs`. Default 10 × `timeoutMs` (1 s).
   */
  maxWaitMs?: number;
  /** `'shadow'`: decide and count, log would-be denials, refuse nothing, send no headers. Default `'enforce'`. */
  mode?: 'enforce' | 'shadow';
  /** Requests to leave alone, e.g. health checks from the load balancer. */
  skip?: (ctx: ExecutionContext) => boolean | Promise<boolean>;
  /** Which headers to send; `false` for none. Default: legacy and draft-10. */
  headers?: boolean | HeaderOptions;
  /** Proxies in front of the app that append to `X-Forwarded-For`. Default: trust the platform's `request.ip`. */
  trustedProxies?: number;
  /** IPv6 clients are grouped by this prefix length. Default 64. */
  ipv6Subnet?: number;
  /**
   * Clients never limited, like `skip` (no store call, no headers): IPv4 and IPv6 addresses
   * and CIDR ranges (`['10.0.0.0/8', '2001:db8::/32', '203.0.113.7']`), matched against the
   * whole client address as `trustedProxies` finds it (not grouped by `ipv6Subnet`). A range
   * with host bits set (`10.0.0.1/8`) fails the start. Default: none.
   */
  allowList?: readonly string[];
  /** Replaces the 429 message. */
  errorMessage?: string | ((decision: Decision) => string);
  /** Register the guard for every route. Default true; false for `@UseGuards(RateLimitGuard)`. */
  global?: boolean;
  /**
   * Your subclass of `RateLimitGuard` (overriding `shouldSkip` or `refuse`), registered as
   * the global guard instead of the module's own. A subclass you register as `APP_GUARD`
   * yourself works too: the module's own guard then stands aside.
   */
  guard?: Type<CanActivate>;
  /** See `RateLimiterOptions.circuitBreaker`. */
  circuitBreaker?: CircuitBreakerOptions | false;
  /**
   * How long bootstrap waits for a Redis client the module creates to connect, in **ms**; and
   * how long a request waits for a client still making its first connection (a client passed
   * in included) before its store call is sent. Default 1000.
   */
  connectTimeoutMs?: number;
  /**
   * On Redis: how often, in **ms**, this instance reads the index of identities that have an
   * override or exemption, so that other identities' requests skip reading their control
   * hash (about 1 µs of Redis CPU per request). A change made through another instance
   * takes effect here within this long plus one round trip; one made through this
   * instance, on its next request. Bootstrap reads the index once (waiting up to
   * `connectTimeoutMs`); until a read succeeds every request reads its control hash.
   * `0` or `false`: no index, every request reads its control hash. Default 1000; an
   * integer from 0 to 2^31-1.
   */
  controlRefreshMs?: number | false;
  /**
   * Called once per request the guard evaluates (not for skipped or unlimited routes),
   * synchronously, before the response: keep it cheap (push to a queue, bump a counter).
   * Identities arrive hashed; durations are in **ms**. A hook that throws (or rejects) never
   * affects the request: it is logged as `rate_limit.config_error`, at most once per 10 s.
   */
  onDecision?: (event: DecisionEvent) => void;
  /**
   * Prometheus metrics through prom-client, an optional peer dependency loaded only when
   * this is set (bootstrap fails with `ERR_RATE_LIMIT_PEER_DEPENDENCY` when it is missing).
   * `true` registers them in prom-client's global registry, named `rate_limit_*`.
   * Default: no metrics, and prom-client is never loaded.
   */
  metrics?: boolean | MetricsOptions;
  /**
   * OpenTelemetry: each decision adds `ratelimit.*` attributes to the active span (it creates
   * none), through `@opentelemetry/api`, an optional peer loaded once at bootstrap. Default:
   * on when the API is installed, off otherwise; without a registered SDK or a recording
   * span a request pays one `trace.getActiveSpan()` call. `false` never loads the API;
   * `true` fails the start with `ERR_RATE_LIMIT_PEER_DEPENDENCY` when it is missing.
   */
  tracing?: boolean;
  /**
   * The kill switch: `false` (or a function answering false) limits nothing, sends no
   * rate-limit headers and makes no Redis call. A function is asked on every request; one
   * that throws counts as `true` (logged as `rate_limit.config_error`). Default `true`.
   */
  enabled?: boolean | (() => boolean | Promise<boolean>);
  /**
   * GraphQL operation cost: each operation's cost computed from its document before any
   * resolver runs, `maxCost`, a points `budget` charged once per operation and refunded down
   * to its actual cost, `extensions.cost` in responses. Needs `graphql` (installed with
   * `@nestjs/graphql`), on Apollo or Mercurius. See {@link GraphQLCostOptions} and
   * docs/guides/graphql.md.
   */
  graphql?: GraphQLCostOptions;
  /**
   * Answers a client that was just refused for a long wait from this process's memory,
   * without Redis, until the wait is over (`Retry-After` counted down). Shadow policies are
   * always counted in Redis. Off by default; `true` takes the defaults of
   * {@link DenyCacheOptions} (waits of 1 s or more, remembered 1 s at most, 10,000 entries).
   */
  denyCache?: boolean | DenyCacheOptions;
  /**
   * The body of an HTTP refusal. `'nest'` (default): Nest's own shape, `{ statusCode, error,
   * message, retryAfter }`. `'problem'`: RFC 9457 problem details as
   * `application/problem+json`, with the problem types of draft-ietf-httpapi-ratelimit-headers
   * (`quota-exceeded` and its `violated-policies` for a 429, `temporary-reduced-capacity` for
   * a 503). Headers are the same either way; other transports keep their own refusals.
   */
  errorFormat?: 'nest' | 'problem';
  /**
   * Overload protection, per process and without the store: calls are admitted against an
   * adaptive concurrency limit (Gradient2 over latency, lowered by event-loop delay) by
   * priority (`@Priority`, `defaultPriority`), before any rate limit is spent; a shed call
   * is answered 503 with `Retry-After` (GraphQL, RPC and WebSocket refusals alike).
   * `@SkipLoadShedding()` exempts a route. `true` takes every default of
   * {@link OverloadOptions}. Default: off, and nothing of it runs per request. See
   * docs/guides/overload.md.
   */
  overload?: boolean | OverloadOptions;
}

/** Options of `RateLimitModule.forRootAsync`. */
export interface RateLimitModuleAsyncOptions {
  imports?: unknown[];
  inject?: unknown[];
  useFactory: (...args: never[]) => RateLimitModuleOptions | Promise<RateLimitModuleOptions>;
  /** See {@link RateLimitModuleOptions.global}: it must be known before the factory runs. */
  global?: boolean;
  /** See {@link RateLimitModuleOptions.guard}: it must be known before the factory runs. */
  guard?: Type<CanActivate>;
}
