import type { ExecutionContext } from '@nestjs/common';
import { shownRemaining } from '../../http/header-values.js';
import type { RequestLike } from '../../http/ip.js';
import type { RateLimitEvents } from '../observability/events.js';
import { refusalFields, type Refusal } from './refusal.js';
import type { DecidedHeaders, Transport } from './transport.js';

/**
 * `extensions.code` of a refusal: `RATE_LIMITED` for a 429 (over a limit), and
 * `SERVICE_UNAVAILABLE` for a 503 (a fail-closed policy whose store is down).
 */
export type GraphQLRefusalCode = 'RATE_LIMITED' | 'SERVICE_UNAVAILABLE';

/** The `extensions` of a refusal as it reaches the client. */
export interface GraphQLRefusalExtensions {
  code: GraphQLRefusalCode;
  /**
   * Seconds to wait before retrying, as in `Retry-After`; absent when the policy hides
   * details (`exposeDetails: false`) or when the call costs more than the limit allows.
   */
  retryAfter?: number;
}

type GraphQLErrorClass = new (
  message: string,
  options: { extensions: GraphQLRefusalExtensions },
) => Error;

/** `GraphQLError` of the app's own `graphql`, set by `load()`. */
let GraphQLError: GraphQLErrorClass | undefined;

/**
 * Nest's `IntrinsicException` (NestJS 11 and later), set by `load()`: the one error Nest's
 * exception handler of non-HTTP contexts passes over without an ERROR line and a stack, so a
 * flood of refusals writes only the throttled `rate_limit.blocked`.
 */
let Intrinsic: (new (message?: string) => Error) | undefined;

type Obj = Record<string, unknown>;

/** A response-path segment of graphql-js's `info.path`. */
interface PathSegment {
  readonly prev: PathSegment | undefined;
  readonly key: string | number;
}

/** What each graphql-ws connection holds, as Apollo's driver passes it on (`context.req`). */
interface ConnectionContext {
  extra: { request?: unknown; user?: unknown };
}

function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null;
}

function isRequest(value: unknown): value is RequestLike {
  return isObject(value) && isObject(value.headers);
}

/** The context resolvers get (`@Context()`), the third resolver argument. */
function contextOf(ctx: ExecutionContext): Obj | undefined {
  const context: unknown = ctx.getArgByIndex(2);
  return isObject(context) ? context : undefined;
}

/**
 * The graphql-ws connection of a subscription: Nest's Apollo driver, by default, hands the
 * whole graphql-ws context over as `req`; an app's own `context` function may spread it.
 */
function connectionOf(context: Obj): ConnectionContext | undefined {
  if (isObject(context.req) && isObject(context.req.extra)) return context.req as never;
  return isObject(context.extra) ? (context as never) : undefined;
}

/**
 * The HTTP request behind the operation: `req`, which Nest's Apollo and Mercurius drivers
 * always put in the context (unless the app's context returns another `req`); else
 * Mercurius's `reply.request`; for a subscription, the WebSocket upgrade request (graphql-ws
 * `extra.request` under Apollo, `request` under Mercurius).
 */
function httpRequestOf(context: Obj): RequestLike | undefined {
  if (isRequest(context.req)) return context.req;
  const connection = connectionOf(context);
  if (connection && isRequest(connection.extra.request)) return connection.extra.request;
  if (isRequest(context.request)) return context.request;
  return isObject(context.reply) && isRequest(context.reply.request)
    ? context.reply.request
    : undefined;
}

// Reported once per process: the setup is wrong for every call, and a line per call would
// drown the log.
let reportedNoRequest = false;

function requestOf(ctx: ExecutionContext, events?: RateLimitEvents): RequestLike | undefined {
  const context = contextOf(ctx);
  const request = context && httpRequestOf(context);
  if (request === undefined && events !== undefined && !reportedNoRequest) {
    reportedNoRequest = true;
    events.configError(
      'transport graphql',
      new Error(
        'the GraphQL context holds no HTTP request, so keys.ip and the IP fallback of every key ' +
          'see ip:unknown: one budget shared by every anonymous client. Return the request as ' +
          "`req` from GraphQLModule's `context` option: ({ req, res }) => ({ req, res }) with " +
          'Apollo on Express, (req, reply) => ({ req, reply }) with Apollo on Fastify; Mercurius ' +
          'and the default context need nothing',
      ),
    );
  }
  return request;
}

/** Where an operation's headers go: the HTTP response not yet sent, and its setter. */
interface HeaderSink {
  readonly response: object;
  set(name: string, value: string): void;
}

/** The HTTP response's header sink, if the operation has one not yet sent. */
function headerSinkOf(ctx: ExecutionContext): HeaderSink | undefined {
  const context = contextOf(ctx);
  if (context === undefined) return undefined;
  // Mercurius (and Apollo on Fastify when the context returns it): the Fastify reply.
  const reply = context.reply;
  if (isObject(reply) && typeof reply.header === 'function') {
    if (reply.sent === true) return undefined;
    const header = reply.header as (n: string, v: string) => void;
    return { response: reply, set: (name, value) => header.call(reply, name, value) };
  }
  // Express: the context's `res`, else the response Express links from the request.
  const request = context.req;
  const response = isObject(context.res)
    ? context.res
    : isObject(request)
      ? request.res
      : undefined;
  if (!isObject(response) || typeof response.setHeader !== 'function') return undefined;
  if (response.headersSent === true) return undefined;
  const setHeader = response.setHeader as (n: string, v: string) => void;
  return { response, set: (name, value) => setHeader.call(response, name, value) };
}

/**
 * How restrictive the decision a response's headers describe is, lowest first: a refusal
 * (-1), else the fewest units left among the policies shown.
 */
function restrictiveness(decided: DecidedHeaders | undefined): number {
  if (decided === undefined || !decided.allowed) return -1;
  let least = Infinity;
  for (const p of decided.shown ?? []) least = Math.min(least, shownRemaining(p));
  return least;
}

/** What the headers already on each response describe (see {@link restrictiveness}). */
const shownOn = new WeakMap<object, number>();

/**
 * Several decisions share one HTTP response (the fields of an operation, and the operation's
 * budget): the headers describe the most restrictive of them, a refusal first, whichever
 * order they were decided in.
 */
function setHeaders(
  ctx: ExecutionContext,
  headers: Readonly<Record<string, string>>,
  decided?: DecidedHeaders,
): void {
  let names: string[] | undefined;
  for (const name in headers) (names ??= []).push(name);
  if (names === undefined) return;
  const sink = headerSinkOf(ctx);
  if (sink === undefined) return;
  const rank = restrictiveness(decided);
  const before = shownOn.get(sink.response);
  if (before !== undefined && before < rank) return;
  shownOn.set(sink.response, rank);
  for (const name of names) sink.set(name, headers[name]!);
}

/** Counted fields of each execution: one carrier per field path, list indices left out. */
const carriers = new WeakMap<object, Map<string, object>>();

/**
 * `posts.author` for `posts.3.author`: every item of a list resolves the same operation field,
 * which counts once.
 */
function fieldPath(path: PathSegment | undefined): string {
  if (path === undefined) return '';
  if (path.prev === undefined) return String(path.key);
  const keys: string[] = [];
  for (let p: PathSegment | undefined = path; p !== undefined; p = p.prev) {
    if (typeof p.key === 'string') keys.push(p.key);
  }
  return keys.reverse().join('.');
}

/**
 * One operation field of one execution. The execution is known by graphql-js's
 * `info.variableValues`, an object built afresh for every execution and shared by all its
 * fields (two subscriptions on one connection may share a context, never this); by the
 * context where there is no `info`.
 */
function carrierOf(ctx: ExecutionContext): object {
  const info: unknown = ctx.getArgByIndex(3);
  const execution =
    isObject(info) && isObject(info.variableValues) ? info.variableValues : contextOf(ctx);
  // Nothing ties this call to others: it counts alone.
  if (execution === undefined) return {};
  const path = fieldPath(isObject(info) ? (info.path as PathSegment | undefined) : undefined);
  let fields = carriers.get(execution);
  if (fields === undefined) carriers.set(execution, (fields = new Map()));
  let carrier = fields.get(path);
  if (carrier === undefined) fields.set(path, (carrier = {}));
  return carrier;
}

/**
 * The GraphQL error of a refusal (an outcome's `refusal`), for any GraphQL server: the
 * message of the HTTP body, `extensions: { code, retryAfter }` (seconds).
 */
export function graphQLRefusal(outcome: { readonly refusal?: Refusal }): Error {
  const { status, message, retryAfter } = refusalFields(outcome.refusal!);
  const extensions: GraphQLRefusalExtensions = {
    code: status === 503 ? 'SERVICE_UNAVAILABLE' : 'RATE_LIMITED',
    ...(retryAfter !== undefined && { retryAfter }),
  };
  // graphql-js copies the `extensions` of any error a resolver throws into the GraphQL error
  // it reports, so the refusal needs to be no GraphQLError on the wire; as an
  // IntrinsicException, Nest does not log it at ERROR with a stack for every refused field.
  if (Intrinsic !== undefined) return Object.assign(new Intrinsic(message), { extensions });
  if (GraphQLError !== undefined) return new GraphQLError(message, { extensions });
  return Object.assign(new Error(message), { extensions });
}

const REFUSED: DecidedHeaders = { allowed: false };

/**
 * GraphQL on Apollo (Express, Fastify) and Mercurius (Fastify), queries, mutations and
 * subscriptions. Reads the resolver arguments `[root, args, context, info]` directly, so
 * `@nestjs/graphql` is never loaded; `graphql` is, once, for `GraphQLError`.
 *
 * - carrier: one operation field of one execution (see {@link carrierOf}): a root field counts
 *   once, and a field resolver under a list once per operation, not once per item;
 * - request: the HTTP request behind the operation, or the WebSocket upgrade request of a
 *   subscription (see {@link httpRequestOf}); a context without one is reported once;
 * - user: `request.user` (or Fastify's `request.raw.user`), else the context's `user`, else
 *   the `user` a graphql-ws `onConnect` put on the connection's `extra`;
 * - headers: on the HTTP response (Express `res.setHeader`, Fastify `reply.header`); none for
 *   subscriptions;
 * - refusal: a `GraphQLError` with `extensions.code` `RATE_LIMITED` (or `SERVICE_UNAVAILABLE`)
 *   and `retryAfter` in seconds; the HTTP status stays what the server gives field errors.
 */
export const graphqlTransport: Transport = {
  type: 'graphql',
  async load() {
    // webpackIgnore: bundlers must not pull in an optional peer at build time.
    const graphql = (await import(/* webpackIgnore: true */ 'graphql')) as unknown as {
      GraphQLError?: GraphQLErrorClass;
      default?: { GraphQLError?: GraphQLErrorClass };
    };
    GraphQLError = graphql.GraphQLError ?? graphql.default?.GraphQLError;
    const common = (await import('@nestjs/common')) as {
      IntrinsicException?: new (message?: string) => Error;
    };
    Intrinsic = common.IntrinsicException;
  },
  carrier: carrierOf,
  request: requestOf,
  user(ctx) {
    const context = contextOf(ctx);
    if (context === undefined) return undefined;
    const request = httpRequestOf(context);
    return (
      request?.user ??
      request?.raw?.user ??
      context.user ??
      (connectionOf(context)?.extra.user as unknown)
    );
  },
  args(ctx) {
    const args: unknown = ctx.getArgByIndex(1);
    return isObject(args) ? args : undefined;
  },
  setHeaders,
  refuse(ctx, refusal, headers): never {
    setHeaders(ctx, headers, REFUSED);
    throw graphQLRefusal({ refusal });
  },
};
