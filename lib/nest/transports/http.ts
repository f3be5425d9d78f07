import { HttpException, type ExecutionContext } from '@nestjs/common';
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

/** The Node response, as far as its end goes. */
type NodeResponse = {
  once?: (event: 'finish' | 'close', listener: () => void) => void;
  statusCode: number;
  /** True once 'close' was emitted (Node >= 18). */
  closed?: boolean;
};

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
    if (refusal.format === 'problem') throw new RateLimitProblemException(refusalProblem(refusal));
    throw new HttpException(refusalBody(refusal), refusal.status);
  },
  onSent(ctx, done) {
    const node = nodeResponseOf(ctx);
    // 'finish' fires once the response is handed to the OS in full; a dropped connection
    // ('close' alone) keeps the spending.
    node?.once!('finish', () => done(node.statusCode));
  },
  onDone(ctx, done) {
    const node = nodeResponseOf(ctx);
    // The client may have gone while the request was being decided: its 'close' is past,
    // and a listener added now would never run (the slot would wait for its lease).
    if (node?.closed === true) return done();
    // 'close' fires after 'finish', and also when the connection drops first: every end.
    node?.once!('close', done);
  },
};
