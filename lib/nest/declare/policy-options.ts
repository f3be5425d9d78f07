import type { ExecutionContext } from '@nestjs/common';
import type { Algorithm, Policy } from '../../core/model/policy.js';
import type { RateInput } from '../../core/model/rate.js';
import type { KeyFn } from './keys.js';

/**
 * A rate chosen per request (plans, tiers): see {@link byTier}. `rateLimitContext(ctx)`
 * gives it the request and the user on every transport.
 */
export type RateFn = (ctx: ExecutionContext) => RateInput | Promise<RateInput>;

/**
 * Units a request spends, chosen per request: an integer >= 0. `rateLimitContext(ctx)` gives
 * it the request (or the handler's arguments) on every transport.
 */
export type CostFn = (ctx: ExecutionContext) => number | Promise<number>;

/** Options of {@link RateLimit}. */
export interface RateLimitOptions {
  /** Names the policy; stacked policies need distinct names. Default `'default'`. */
  name?: string;
  /**
   * Budget shared by the routes that name it. Default: one per route (`<Controller>.<handler>`),
   * which `'route'` also says; on the module `default`, `'global'` (one across the API).
   */
  scope?: string;
  /** Default: the module's `algorithm`, else `'token-bucket'`. */
  algorithm?: Algorithm;
  /** Capacity of `token-bucket` / `gcra`. Default: the limit. */
  burst?: number;
  /** Who the request counts against. Default: the module's `key`, else `keys.userOrIp`. */
  key?: KeyFn;
  /** Units per request: an integer >= 0, or a function of the request. Default 1. */
  cost?: number | CostFn;
  /** When the store is unreachable, answer 503 instead of admitting. Default: the module's `failClosed`. */
  failClosed?: boolean;
  /**
   * `'open'`, `'closed'` or `'local'` (insurance limits): see the module's `onStoreFailure`.
   * Wins over `failClosed`. Default: this policy's `failClosed`, else the module's setting.
   */
  onStoreFailure?: StoreFailureMode;
  /** Decide and count, but only log would-be denials (`rate_limit.shadow_blocked`). */
  shadow?: boolean;
  /** Include this policy in the rate-limit headers. Default true. */
  headers?: boolean;
  /** Put the wait in the 429 body. `false` for login pages. Default true. */
  exposeDetails?: boolean;
  /**
   * A penalty: once a request is refused under this policy, its identity is refused for this
   * long, e.g. `'15m'` or a number of **ms** (`Retry-After` shows the block's end). Resets,
   * exemptions and overrides lift it. Default: none.
   */
  block?: string | number;
  /** With `block`: a request refused during the block starts it again. Default false. */
  extendBlock?: boolean;
  /**
   * Count by outcome: `'failed'` gives an admitted request its units back once its response
   * shows it succeeded (failed logins only), `'succeeded'` once it shows it failed. Spent on
   * decision as always; refunded in one atomic store call after the response is sent (HTTP;
   * a request whose response never completes keeps its spending). Default: every request.
   */
  count?: 'failed' | 'succeeded';
  /**
   * With `count`: whether a response failed, from its HTTP status (a thrown exception is
   * answered with its status, 500 for anything but an `HttpException`). Default
   * `status >= 400`.
   */
  failed?: (status: number) => boolean;
  /**
   * On an HTTP route with guards of its own, where this policy's key needs the user: the
   * burst of the address budget that requests the guards refuse spend (see
   * docs/guides/identities-and-proxies.md). That budget is a token bucket at this policy's
   * rate holding `max(burst, addressBurst)` units: this many requests of one address may
   * wait on the guards at once, and a guesser whose requests they all refuse gets this many,
   * then this policy's rate. An integer >= 1. Default: the module's `addressBurst`, else 20.
   */
  addressBurst?: number;
}

/**
 * The scope that means "this route's own budget" (`<Controller>.<handler>`): the default of
 * `@RateLimit`, and what a module default names to count per route, as `@nestjs/throttler`
 * does.
 */
export const ROUTE_SCOPE = 'route';

/** See {@link RateLimitModuleOptions.onStoreFailure}. */
export type StoreFailureMode = 'open' | 'closed' | 'local';

/** A policy as declared by `@RateLimit`: a validated static policy, or a rate function. */
export interface DeclaredPolicy {
  readonly name: string;
  /** Validated when the rate is static; resolved per request otherwise. */
  readonly policy?: Policy;
  readonly rateFn?: RateFn;
  readonly options: RateLimitOptions;
  /** `Controller.handler` (or `Controller`) where it was declared, for error messages. */
  readonly where: string;
}
