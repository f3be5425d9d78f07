import { HttpException, type ExecutionContext } from '@nestjs/common';
import { withoutStack } from '../../core/errors.js';
import type { RequestLike } from '../../http/ip.js';
import { RateLimitProblemException } from './problem-details.js';
import { refusalBody, refusalProblem } from './refusal.js';
import type { Transport } from './transport.js';

/** An Express response or a Fastify reply, as far as headers go. */
type HeaderSink = {
  setHeader?: (name: string, value: string) => void;
  header?: (name: string, value: string) => void;
  raw?: unknown;
};

/** The Node response (HTTP/1 `ServerResponse` or `Http2ServerResponse`), as far as its end goes. */
type NodeResponse = {
  once?: (event: 'finish' | 'close', listener: () => void) => void;
  statusCode: number;
  /** True once 'close' was emitted (HTTP/1, Node >= 18; absent on HTTP/2). */
  closed?: boolean;
  /** True once the response was handed to the OS in full. */
  writableFinished?: boolean;
  /** HTTP/2: the stream, closed once reset or ended. */
  stream?: { closed?: boolean; destroyed?: boolean } | null;
};

/** The Node request (Express's, or a Fastify request's `raw`), as far as its arrival goes. */
type Arrival = {
  /** HTTP/1: the whole message arrived (false while, or when, its body is cut short). */
  complete?: boolean;
  /** 'end' emitted: its body read to the end. */
  readableEnded?: boolean;
  /** HTTP/2: the stream (`complete` there is true once it closed, however). */
  stream?: { endAfterHeaders?: boolean };
};

/** Whether the request's body was cut short: the client left before sending all of it. */
function unfinished(request: Arrival | undefined): boolean {
  if (request === undefined) return false;
  if (request.stream) return request.stream.endAfterHeaders === false && !request.readableEnded;
  return request.complete === false;
}

/** Whether the response's 'close' is past: a listener added now would never run. */
function closed(node: NodeResponse): boolean {
  // Http2ServerResponse has no `closed`: its stream says (a reset stream is closed at once).
  return node.closed ?? (node.stream?.closed === true || node.stream?.destroyed === true);
}

/** Express's response is the Node one; Fastify's reply holds it as `raw`. */
function nodeResponseOf(ctx: ExecutionContext): NodeResponse | undefined {
  const response = ctx.getArgByIndex<({ raw?: NodeResponse } & NodeResponse) | undefined>(1);
  const node = response?.raw ?? response;
  return typeof node?.once === 'function' ? node : undefined;
}

// `getArgByIndex` is what `switchToHttp().getRequest()` reads, without the three closures
// `switchToHttp` allocates on every call.
function requestOf(ctx: ExecutionContext): RequestLike | undefined {
  const request: unknown = ctx.getArgByIndex(0);
  return typeof request === 'object' && request !== null ? (request as RequestLike) : undefined;
}

/** Sets headers on an Express response or a Fastify reply. */
function setHeaders(ctx: ExecutionContext, headers: Readonly<Record<string, string>>): void {
  const response = ctx.getArgByIndex<HeaderSink | undefined>(1);
  if (typeof response !== 'object' || response === null) return;
  // Fastify's reply has `header` and a `raw` Node response; Express's has `setHeader`.
  const fastify = response.raw !== undefined && typeof response.header === 'function';
  for (const name in headers) {
    if (fastify) response.header!(name, headers[name]!);
    else response.setHeader?.(name, headers[name]!);
  }
}

/**
 * HTTP on Express and Fastify: the request is the carrier and the source of the identity;
 * the user is `request.user`, else (Fastify, Nest middleware) `request.raw.user`; a refusal
 * is an `HttpException` with the 429 or 503 body, its headers set first; with
 * `errorFormat: 'problem'`, a `RateLimitProblemException` with the RFC 9457 body.
 */
export const httpTransport: Transport = {
  type: 'http',
  carrier: requestOf,
  request: requestOf,
  user(ctx) {
    const request = requestOf(ctx);
    return request?.user ?? request?.raw?.user;
  },
  args: () => undefined,
  setHeaders,
  refuse(ctx, refusal, headers): never {
    setHeaders(ctx, headers);
    throw withoutStack(() =>
      refusal.format === 'problem'
        ? new RateLimitProblemException(refusalProblem(refusal))
        : new HttpException(refusalBody(refusal), refusal.status),
    );
  },
  onSent(ctx, done) {
    const node = nodeResponseOf(ctx);
    // 'finish' fires once the response is handed to the OS in full; a dropped connection
    // ('close' alone) keeps the spending.
    node?.once!('finish', () => done(node.statusCode));
  },
  onDone(ctx, done) {
    const node = nodeResponseOf(ctx);
    if (node === undefined) return;
    const request = ctx.getArgByIndex<(Arrival & { raw?: Arrival }) | undefined>(0);
    // No handler runs any more once the response is sent, nor for a request whose body
    // never arrived in full (it is read before the handler is called).
    const over = () => node.writableFinished === true || unfinished(request?.raw ?? request);
    // The client may have gone while the request was being decided (an abort, an HTTP/2
    // stream reset): its 'close' is past, and a listener added now would never run.
    if (closed(node)) return done(over());
    // 'close' fires after 'finish', and also when the connection drops first: every end.
    node.once!('close', () => done(over()));
  },
};
