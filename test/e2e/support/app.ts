/**
 * Shared builder for the e2e suite: a real Nest app with RateLimitModule on Express or
 * Fastify, listening on 127.0.0.1, plus small helpers to read rate-limit headers and
 * capture the logs.
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import {
  Injectable,
  Module,
  type INestApplication,
  type LoggerService,
  type MiddlewareConsumer,
  type NestMiddleware,
  type NestModule,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { RateLimitModule, type RateLimitModuleOptions } from '../../../lib/index.js';
import { redisUrl } from '../../harness/redis.js';

export type Platform = 'express' | 'fastify';
export const PLATFORMS: Platform[] = ['express', 'fastify'];

export interface AppHandle {
  app: INestApplication;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** The key prefix this app uses in Redis. */
  prefix: string;
  /** GET on a path of this app, body read (JSON when it parses). */
  get(path: string, headers?: Record<string, string>): Promise<Reply>;
  close(): Promise<void>;
}

export interface CreateAppOptions {
  /** A logger for NestFactory.create; default `false` (silent). */
  logger?: LoggerService | false;
  /**
   * Sets `request.user = { id }` from the `x-user` header before any guard runs, on both
   * platforms (an Express middleware, a Fastify `onRequest` hook).
   */
  userFromHeader?: boolean;
  /**
   * Authenticates in a Nest middleware (`MiddlewareConsumer`), as the README advises: sets
   * `user = { id: <x-user>, plan: <x-plan> }` on the request the middleware gets, which on
   * Fastify is the raw Node request, not the FastifyRequest that guards get.
   */
  authMiddleware?: boolean;
  /** Extra providers of the root module. */
  providers?: Type[];
}

/** The authentication of {@link CreateAppOptions.authMiddleware}. */
@Injectable()
class AuthMiddleware implements NestMiddleware {
  use(req: { headers: Record<string, unknown>; user?: unknown }, _res: unknown, next: () => void) {
    const id = req.headers['x-user'];
    if (typeof id === 'string') req.user = { id, plan: req.headers['x-plan'] };
    next();
  }
}

/** A prefix unique to one app, so suites sharing the Redis never collide. */
export function uniquePrefix(): string {
  return `e2e${randomUUID().slice(0, 8)}`;
}

/** The root module of a test app; with `middleware`, applied to every controller. */
export function rootModule(
  moduleOptions: RateLimitModuleOptions,
  controllers: Type[],
  providers: Type[] = [],
  middleware?: Type<NestMiddleware>,
): Type {
  @Module({ imports: [RateLimitModule.forRoot(moduleOptions)], controllers, providers })
  class E2eModule implements NestModule {
    configure(consumer: MiddlewareConsumer): void {
      if (middleware && controllers.length > 0)
        consumer.apply(middleware).forRoutes(...controllers);
    }
  }
  return E2eModule;
}

/**
 * Boots an app with `RateLimitModule.forRoot({ redis: <shared test Redis>, prefix: <unique>,
 * ...moduleOptions })` and `controllers`, on `platform`, listening on 127.0.0.1:0.
 */
export async function createApp(
  platform: Platform,
  moduleOptions: RateLimitModuleOptions,
  controllers: Type[],
  options: CreateAppOptions = {},
): Promise<AppHandle> {
  const prefix = moduleOptions.prefix ?? uniquePrefix();
  const full: RateLimitModuleOptions = {
    ...(moduleOptions.store === undefined && { redis: redisUrl() }),
    // Generous, so a loaded CI machine never turns a slow call into a fail-open; tests of
    // timeouts set their own.
    timeoutMs: 2000,
    ...moduleOptions,
    prefix,
  };
  const module = rootModule(
    full,
    controllers,
    options.providers,
    options.authMiddleware ? AuthMiddleware : undefined,
  );
  const app = await bootstrap(platform, module, options.logger ?? false);
  if (options.userFromHeader) installUserFromHeader(platform, app);
  const inFlight = trackRequests(app);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  return {
    app,
    url,
    prefix,
    get: (path, headers = {}) => request(`${url}${path}`, headers),
    close: () => closeWithin(app, inFlight),
  };
}

/** Each open connection of this app's server, with the last request it carried. */
function trackRequests(app: INestApplication): Map<Socket, IncomingMessage | undefined> {
  const open = new Map<Socket, IncomingMessage | undefined>();
  const server = app.getHttpServer() as Server;
  server.on('connection', (socket: Socket) => {
    open.set(socket, undefined);
    socket.on('close', () => open.delete(socket));
  });
  server.on('request', (req: IncomingMessage) => open.set(req.socket, req));
  return open;
}

/**
 * `app.close()`, which waits for every open connection. A connection that never sent a request
 * is closed at once: a client that aborted a fetch before its request was written leaves one
 * in its pool (undici, seen under load in concurrency-slots), and nothing runs for it. If
 * another is still open after 5 s, the test fails naming what each carried last (a request
 * left unanswered is a bug of ours), and they are closed so the next suite still runs.
 */
async function closeWithin(
  app: INestApplication,
  open: Map<Socket, IncomingMessage | undefined>,
): Promise<void> {
  const closing = app.close();
  for (const [socket, req] of open) if (req === undefined) socket.destroy();
  let timer: NodeJS.Timeout | undefined;
  const late = await Promise.race([
    closing.then(() => false),
    new Promise<true>((resolve) => (timer = setTimeout(() => resolve(true), 5000))),
  ]);
  clearTimeout(timer);
  if (!late) return;
  const described = [...open].map(([socket, req]) =>
    req === undefined
      ? `no request (${socket.bytesRead} bytes read)`
      : `${req.method} ${req.url} (body ${req.complete ? 'complete' : 'incomplete'}, ` +
        `response ${(req as { res?: ServerResponse }).res?.writableFinished ? 'sent' : 'not sent'})`,
  );
  for (const socket of open.keys()) socket.destroy();
  await closing;
  throw new Error(`app.close() waited 5 s on open connections: ${described.join('; ')}`);
}

/** NestFactory.create on the chosen platform (rejects as the module's bootstrap does). */
export function bootstrap(
  platform: Platform,
  module: Type,
  logger: LoggerService | false = false,
): Promise<INestApplication> {
  // abortOnError: false makes a failed bootstrap reject instead of calling process.abort().
  return platform === 'fastify'
    ? NestFactory.create(module, new FastifyAdapter(), { logger, abortOnError: false })
    : NestFactory.create(module, { logger, abortOnError: false });
}

function installUserFromHeader(platform: Platform, app: INestApplication): void {
  if (platform === 'express') {
    app.use(
      (
        req: { headers: Record<string, unknown>; user?: unknown },
        _res: unknown,
        next: () => void,
      ) => {
        const id = req.headers['x-user'];
        if (typeof id === 'string') req.user = { id };
        next();
      },
    );
    return;
  }
  // Fastify middleware (middie) sees the raw Node request, not the FastifyRequest that guards
  // get, so the user goes on in an onRequest hook instead.
  const fastify = app.getHttpAdapter().getInstance() as {
    addHook(
      name: 'onRequest',
      hook: (
        req: { headers: Record<string, unknown>; user?: unknown },
        reply: unknown,
        done: () => void,
      ) => void,
    ): void;
  };
  fastify.addHook('onRequest', (req, _reply, done) => {
    const id = req.headers['x-user'];
    if (typeof id === 'string') req.user = { id };
    done();
  });
}

/** The rate-limit headers of a response (absent ones omitted). */
export function rateLimitHeadersOf(response: Response): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of [
    'x-ratelimit-limit',
    'x-ratelimit-remaining',
    'x-ratelimit-reset',
    'ratelimit',
    'ratelimit-policy',
  ]) {
    const value = response.headers.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

/** `{ burst: { r: 2, t: 1 }, ... }` from a `RateLimit: "burst";r=2;t=1, ...` header. */
export function parseRateLimit(header: string | null): Record<string, { r: number; t: number }> {
  const out: Record<string, { r: number; t: number }> = {};
  if (!header) return out;
  for (const member of header.split(',')) {
    const match = /^\s*"([^"]+)";r=(\d+);t=(\d+)\s*$/.exec(member);
    if (!match)
      throw new Error(`malformed RateLimit member ${JSON.stringify(member)} in ${header}`);
    out[match[1]!] = { r: Number(match[2]), t: Number(match[3]) };
  }
  return out;
}

/** A response with its body read. */
export interface Reply {
  status: number;
  headers: Headers;
  body: unknown;
  /** Rate-limit headers present on the response. */
  rl: Record<string, string>;
}

/** GET `url` with `headers`; reads the body (JSON when it parses, else text). */
export async function request(url: string, headers: Record<string, string> = {}): Promise<Reply> {
  const response = await fetch(url, { headers });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return {
    status: response.status,
    headers: response.headers,
    body,
    rl: rateLimitHeadersOf(response),
  };
}

/** Sends `n` requests one after the other. */
export async function times(n: number, send: () => Promise<Reply>): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < n; i++) replies.push(await send());
  return replies;
}

/** A LoggerService that keeps every line, for asserting on log events. */
export class CapturingLogger implements LoggerService {
  readonly lines: { level: string; message: string }[] = [];

  private push(level: string, message: unknown): void {
    this.lines.push({ level, message: String(message) });
  }
  log(message: unknown): void {
    this.push('log', message);
  }
  error(message: unknown): void {
    this.push('error', message);
  }
  warn(message: unknown): void {
    this.push('warn', message);
  }
  debug(message: unknown): void {
    this.push('debug', message);
  }
  verbose(message: unknown): void {
    this.push('verbose', message);
  }
  fatal(message: unknown): void {
    this.push('fatal', message);
  }

  /** Lines containing `event` (e.g. `rate_limit.backend_error`). */
  matching(event: string): string[] {
    return this.lines.filter((l) => l.message.includes(event)).map((l) => l.message);
  }

  clear(): void {
    this.lines.length = 0;
  }
}

/**
 * Polls `check` every 25 ms until it holds, for at most `timeoutMs`; false on timeout.
 * For conditions that real time brings about (Redis coming back), never as a sleep.
 */
export async function pollUntil(
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (performance.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
