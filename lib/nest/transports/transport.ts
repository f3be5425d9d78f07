import type { ExecutionContext } from '@nestjs/common';
import type { RequestLike } from '../../http/ip.js';
import type { RateLimitEvents } from '../observability/events.js';
import type { HeaderPolicy } from '../../http/headers.js';
import type { Refusal } from './refusal.js';

/** What a set of headers describes: admitted or not, and the policies shown. */
export interface DecidedHeaders {
  readonly allowed: boolean;
  readonly shown?: readonly HeaderPolicy[];
}

/**
 * One Nest transport as the guard meets it: where the request and the user come
 * from, what one counted call is, where the headers go, and how a refusal is raised. One
 * object per transport, in its own file beside this one, listed in `registry.ts`; only
 * the guard and its deliver stage call one.
 *
 * The guard calls these with the context of one guarded call, in this order: `load` (once
 * per process), `carrier`, `request`, then `setHeaders` or `refuse`. Only `refuse` throws;
 * the others answer undefined (or do nothing) for a context that lacks what they read, and
 * the guard admits the call when one throws anyway.
 */
export interface Transport {
  /** The `ctx.getType()` this adapter serves: `'http'`, `'graphql'`, `'ws'`, `'rpc'`. */
  readonly type: string;

  /**
   * Loads the transport's optional peer (`@nestjs/websockets`, `@nestjs/microservices`,
   * `@nestjs/graphql`, `graphql`) with a dynamic `import()`, never at import time. The guard
   * awaits it the first time it meets this context, before any other call; a rejection
   * leaves the context unlimited and is logged as `rate_limit.config_error`. Absent when
   * the adapter needs nothing beyond `@nestjs/common`.
   */
  load?(): Promise<void>;

  /**
   * The object one counted call lives on; the outcome is stored on it, so a call the guard
   * sees twice (a global guard and `@UseGuards`) counts once. HTTP: the request; GraphQL:
   * one field resolution; WebSocket: one message; RPC: one message or event. Undefined
   * leaves the call unlimited.
   */
  carrier(ctx: ExecutionContext): object | undefined;

  /**
   * What the client address and headers are read from (`keys.ip`, `keys.header`): HTTP the
   * Express or Fastify request; GraphQL the HTTP request behind the operation; WebSocket the
   * handshake; RPC on TCP `{ ip, headers: {} }` of the socket. Undefined when the transport
   * has none (RPC on any other transport): `keys.ip` then answers `ip:unknown` and key
   * functions must name the identity themselves. Given the module's `events`, a setup that
   * leaves every call without its request is logged (once per process).
   */
  request(ctx: ExecutionContext, events?: RateLimitEvents): RequestLike | undefined;

  /**
   * The authenticated user, or undefined. HTTP: `request.user`, else the `user` that Nest
   * middleware set on Fastify's raw request; WebSocket: the user on the socket.
   */
  user(ctx: ExecutionContext): unknown;

  /**
   * The handler's arguments, for cost and rate functions: GraphQL the field's arguments,
   * WebSocket the message body, RPC the payload. Undefined on HTTP (the request holds them).
   */
  args(ctx: ExecutionContext): unknown;

  /**
   * Sends the informational headers where the transport has any (HTTP, GraphQL over HTTP);
   * does nothing elsewhere. `headers` maps header names to values (times in **seconds**).
   * `decided` is the decision they describe: where several decisions of one request share a
   * response (the fields of a GraphQL operation), the transport keeps the most restrictive.
   */
  setHeaders(
    ctx: ExecutionContext,
    headers: Readonly<Record<string, string>>,
    decided?: DecidedHeaders,
  ): void;

  /**
   * Renders and raises a transport-neutral refusal (status 429 or 503, the wait in
   * **seconds**: see `refusal.ts`), after sending `headers` where there are headers.
   * @throws always: HTTP an `HttpException`; WebSocket a `WsException`; RPC an
   *   `RpcException`; GraphQL a `GraphQLError` with `extensions.code: 'RATE_LIMITED'`
   */
  refuse(ctx: ExecutionContext, refusal: Refusal, headers: Readonly<Record<string, string>>): never;

  /**
   * Calls `done` with the response's status once it has been sent in full (never when the
   * connection drops first). Transports without it settle nothing: `count` policies keep
   * what they spent there.
   */
  onSent?(ctx: ExecutionContext, done: (status: number) => void): void;

  /**
   * Calls `done` once the call is over for the transport, however it ends: `over` true when
   * no handler will run for it any more (its response was sent in full, or its connection
   * closed before its request had arrived in full), false when the client merely left (the
   * handler may still be running then, or start later). What ends the concurrency slots of a
   * call whose handler never claimed them (see `end/slot-hold.ts`), and of a streamed
   * body. Transports without it (the handler-bound ones: GraphQL, WebSocket, RPC) end them
   * when the handler's result settles (`RateLimitSettleInterceptor`).
   */
  onDone?(ctx: ExecutionContext, done: (over: boolean) => void): void;
}
