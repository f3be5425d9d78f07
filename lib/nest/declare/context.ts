import type { ExecutionContext } from '@nestjs/common';
import type { RequestLike } from '../../http/ip.js';
import { adapterOf } from '../transports/registry.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- the defaults follow Nest's own `getRequest<T = any>()`, so recipes read `request.query` without a cast */

/**
 * What a user function (`key`, a rate function, `cost`, `byTier`'s plan, `skip`) needs to
 * know about the call being limited, whatever its transport. See {@link rateLimitContext}.
 */
export interface RateLimitContext<TRequest = any, TUser = any, TArgs = any> {
  /** `ctx.getType()`: `'http'`, `'graphql'`, `'ws'` or `'rpc'`. */
  readonly transport: string;
  /**
   * HTTP: the Express or Fastify request. GraphQL: the HTTP request behind the operation.
   * WebSocket: the handshake. RPC on TCP: `{ ip, headers: {} }` of the caller's socket (the
   * transport context itself is `ctx.switchToRpc().getContext()`). Undefined where there is
   * none (RPC on other transports, or a transport that is not limited).
   */
  readonly request: TRequest | undefined;
  /**
   * The authenticated user, or undefined. On HTTP `request.user`, else the `user` that Nest
   * middleware set on Fastify's raw request (where it lands on Fastify).
   */
  readonly user: TUser | undefined;
  /**
   * The handler's arguments where the request does not hold them: GraphQL the field's
   * arguments, WebSocket the message body, RPC the payload. Undefined on HTTP.
   */
  readonly args: TArgs | undefined;
}

/**
 * The request, the user and the arguments of the call being limited, whatever the
 * transport: for user functions, instead of `ctx.switchToHttp()` (which only HTTP has, and
 * which misses a user set by middleware on Fastify).
 *
 * ```ts
 * @RateLimit(byTier({ free: '100/h', pro: '5000/h' }, (ctx) => rateLimitContext(ctx).user?.plan, { fallback: 'free' }))
 * ```
 *
 * Never throws; fields the transport lacks are undefined.
 */
export function rateLimitContext<TRequest = any, TUser = any, TArgs = any>(
  ctx: ExecutionContext,
): RateLimitContext<TRequest, TUser, TArgs> {
  const transport = adapterOf(ctx);
  return {
    transport: ctx.getType(),
    request: transport?.request(ctx) as TRequest | undefined,
    user: transport?.user(ctx) as TUser | undefined,
    args: transport?.args(ctx) as TArgs | undefined,
  };
}

/* eslint-enable @typescript-eslint/no-explicit-any */

/** {@link RateLimitContext.request} alone, without building the whole context (built-in keys run per request). */
export function requestOf(ctx: ExecutionContext): RequestLike | undefined {
  return adapterOf(ctx)?.request(ctx);
}

/** {@link RateLimitContext.user} alone, without building the whole context. */
export function userOf(ctx: ExecutionContext): unknown {
  return adapterOf(ctx)?.user(ctx);
}
