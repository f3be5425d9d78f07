/**
 * WebSocket apps and clients for the transport tests: a Nest app with RateLimitModule and
 * gateways on socket.io or ws, listening on 127.0.0.1, and real clients (`socket.io-client`,
 * `ws`) that hand back every event they receive, in order.
 */
import 'reflect-metadata';
import type { INestApplication, LoggerService, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IoAdapter } from '@nestjs/platform-socket.io';
import { WsAdapter } from '@nestjs/platform-ws';
import { io, type Socket } from 'socket.io-client';
import { WebSocket } from 'ws';
import type { RateLimitModuleOptions } from '../../../lib/index.js';
import { rootModule, uniquePrefix } from '../../e2e/support/app.js';
import { redisUrl } from '../../harness/redis.js';

export type WsPlatform = 'socket.io' | 'ws';
export const WS_PLATFORMS: WsPlatform[] = ['socket.io', 'ws'];

/** One event a client received: socket.io's event name and first argument, or ws's `{ event, data }`. */
export interface Received {
  event: string;
  data: unknown;
}

/** How a connection ended, once it has. */
interface Closed {
  /** socket.io: the `disconnect` reason; ws: the close code and reason. */
  reason: string;
}

export interface TestClient {
  /** Sends `event` with `data` and resolves with the next event received (an answer or `exception`). */
  send(event: string, data?: unknown): Promise<Received>;
  /** The next event received, or the one already waiting. */
  next(): Promise<Received>;
  /** Resolves when the server ends the connection. */
  readonly closed: Promise<Closed>;
  close(): void;
}

interface ConnectOptions {
  /** The user id: socket.io sends it in `auth.user`, ws in the `x-user` header. */
  user?: string;
  /** socket.io: sent in `auth.token`. */
  token?: string;
  headers?: Record<string, string>;
}

export interface WsAppHandle {
  app: INestApplication;
  prefix: string;
  connect(options?: ConnectOptions): Promise<TestClient>;
  close(): Promise<void>;
}

/**
 * Boots `gateways` (and `providers`) with `RateLimitModule.forRoot({ redis: <shared test
 * Redis>, prefix: <unique>, ...moduleOptions })` on `platform`. One gateway per app on ws,
 * whose adapter serves one gateway per path.
 */
export async function createWsApp(
  platform: WsPlatform,
  moduleOptions: RateLimitModuleOptions,
  gateways: Type[],
  { providers = [], logger = false }: { providers?: Type[]; logger?: LoggerService | false } = {},
): Promise<WsAppHandle> {
  const prefix = moduleOptions.prefix ?? uniquePrefix();
  const module = rootModule(
    {
      ...(moduleOptions.store === undefined && { redis: redisUrl() }),
      timeoutMs: 2000,
      ...moduleOptions,
      prefix,
    },
    [],
    [...gateways, ...providers],
  );
  const app = await NestFactory.create(module, { logger, abortOnError: false });
  app.useWebSocketAdapter(platform === 'ws' ? new WsAdapter(app) : new IoAdapter(app));
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  const clients: TestClient[] = [];
  return {
    app,
    prefix,
    async connect(options = {}) {
      const client = await (platform === 'ws' ? wsClient : ioClient)(port, options);
      clients.push(client);
      return client;
    },
    async close() {
      for (const client of clients) client.close();
      await app.close();
    },
  };
}

/** A queue of received events, each awaited in turn. */
function inbox(): { push(r: Received): void; next(): Promise<Received> } {
  const waiting: Received[] = [];
  const takers: ((r: Received) => void)[] = [];
  return {
    push: (r) => (takers.length > 0 ? takers.shift()!(r) : waiting.push(r)),
    next: () =>
      waiting.length > 0
        ? Promise.resolve(waiting.shift()!)
        : new Promise((resolve) => takers.push(resolve)),
  };
}

function ioClient(port: number, { user, token, headers }: ConnectOptions): Promise<TestClient> {
  const socket: Socket = io(`http://127.0.0.1:${port}`, {
    transports: ['websocket'],
    reconnection: false,
    forceNew: true,
    auth: { ...(user !== undefined && { user }), ...(token !== undefined && { token }) },
    ...(headers && { extraHeaders: headers }),
  });
  const received = inbox();
  socket.onAny((event: string, data: unknown) => received.push({ event, data }));
  const closed = new Promise<Closed>((resolve) =>
    socket.on('disconnect', (reason) => resolve({ reason })),
  );
  return new Promise((resolve, reject) => {
    socket.on('connect_error', reject);
    socket.on('connect', () =>
      resolve({
        send(event, data) {
          socket.emit(event, data);
          return received.next();
        },
        next: received.next,
        closed,
        close: () => void socket.disconnect(),
      }),
    );
  });
}

function wsClient(port: number, { user, headers = {} }: ConnectOptions): Promise<TestClient> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/`, {
    headers: { ...headers, ...(user !== undefined && { 'x-user': user }) },
  });
  const received = inbox();
  socket.on('message', (raw) => received.push(JSON.parse(String(raw)) as Received));
  const closed = new Promise<Closed>((resolve) =>
    socket.on('close', (code, reason) => resolve({ reason: `${code} ${String(reason)}` })),
  );
  return new Promise((resolve, reject) => {
    socket.on('error', reject);
    socket.on('open', () =>
      resolve({
        send(event, data) {
          socket.send(JSON.stringify({ event, data }));
          return received.next();
        },
        next: received.next,
        closed,
        close: () => socket.terminate(),
      }),
    );
  });
}

/** Sends `event` `n` times, one after the other, and returns what each got back. */
export async function sendTimes(
  client: TestClient,
  n: number,
  event: string,
  data: (i: number) => unknown = (i) => i + 1,
): Promise<Received[]> {
  const out: Received[] = [];
  for (let i = 0; i < n; i++) out.push(await client.send(event, data(i)));
  return out;
}
