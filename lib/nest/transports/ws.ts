import type { ExecutionContext } from '@nestjs/common';
import type { WsException } from '@nestjs/websockets';
import type { RequestLike } from '../../http/ip.js';
import { refusalFields, type Refusal } from './refusal.js';
import type { Transport } from './transport.js';

/**
 * What a WebSocket client receives when it is refused: the payload of the `WsException` the
 * guard throws, which Nest's default `BaseWsExceptionFilter` sends as the `exception` event
 * (socket.io: `socket.on('exception', …)`; ws: the message
 * `{ "event": "exception", "data": … }`). Also what {@link RateLimitService.limitConnection}
 * sends before it disconnects a refused client.
 */
export interface WsRateLimitError {
  /** 429: limited; 503: a fail-closed policy's store is unreachable. */
  status: 429 | 503;
  error: 'Too Many Requests' | 'Service Unavailable';
  message: string;
  /**
   * The wait before a retry can be admitted, in **seconds** (>= 1; 1 for a 503). Absent when
   * the policy hides details (`exposeDetails: false`) or the call can never be admitted.
   */
  retryAfter?: number;
}

/**
 * The HTTP upgrade request of a WebSocket connection, as far as the limiter reads it: a Node
 * `IncomingMessage` (what `handleConnection(client, request)` gets on `@nestjs/platform-ws`).
 */
export interface HandshakeRequest {
  headers: Record<string, string | string[] | undefined>;
  socket?: { remoteAddress?: string } | null;
}

/**
 * A client socket of either platform, as far as we read it. socket.io: `handshake` (its
 * address and headers), `data.user` by convention. ws: the `WebSocket` object, whose only
 * trace of its connection is `_socket` (the TCP socket; stable across ws 7 and 8).
 */
type WsClient = {
  handshake?: { address?: string; headers?: RequestLike['headers'] } | null;
  _socket?: { remoteAddress?: string } | null;
  data?: { user?: unknown } | null;
  user?: unknown;
  request?: { user?: unknown } | null;
};

/**
 * The handshake of each client, built once per socket: the first message reads it, and a
 * socket's own address is gone once it closes. Keyed on the client, so it goes with it.
 */
const handshakes = new WeakMap<object, RequestLike>();

/** `WsException` of `@nestjs/websockets`, set by `load`: never imported at module load. */
let WsExceptionClass: typeof WsException | undefined;

function clientOf(ctx: ExecutionContext): WsClient | undefined {
  const client: unknown = ctx.getArgByIndex(0);
  return typeof client === 'object' && client !== null ? (client as WsClient) : undefined;
}

/**
 * Hands the limiter the upgrade request of a `ws` (`@nestjs/platform-ws`) client, so its
 * headers are read like an HTTP request's: `X-Forwarded-For` under `trustedProxies`,
 * `keys.header(…)`. Call it in `handleConnection(client, request)`; without it a `ws` client
 * is identified by the address of its TCP connection alone. socket.io clients need nothing:
 * their `handshake` carries the headers.
 */
export function recordHandshake(client: object, request: HandshakeRequest): void {
  handshakes.set(client, {
    headers: request.headers ?? {},
    socket: { remoteAddress: request.socket?.remoteAddress ?? peerOf(client as WsClient) },
  });
}

function peerOf(client: WsClient): string | undefined {
  return client.handshake?.address ?? client._socket?.remoteAddress;
}

/**
 * The handshake as a `RequestLike`: socket.io's `handshake` (its `address` is the peer of the
 * connection, not a proxy's claim), or what {@link recordHandshake} kept for a `ws` client,
 * else the `ws` client's TCP peer without headers.
 */
export function handshakeOf(client: object): RequestLike {
  let handshake = handshakes.get(client);
  if (handshake === undefined) {
    const c = client as WsClient;
    handshake = { headers: c.handshake?.headers ?? {}, socket: { remoteAddress: peerOf(c) } };
    handshakes.set(client, handshake);
  }
  return handshake;
}

/**
 * The user on a socket: `client.data.user` (socket.io's place for per-socket data), else
 * `client.user` (a `ws` client, or a socket.io one set so), else `client.request.user`
 * (socket.io with Passport as an engine middleware).
 */
function userOnSocket(client: object): unknown {
  const c = client as WsClient;
  return c.data?.user ?? c.user ?? c.request?.user;
}

/** A refusal as a WebSocket client receives it (see {@link WsRateLimitError}). */
export function wsErrorOf(refusal: Refusal): WsRateLimitError {
  return refusalFields(refusal);
}

/**
 * WebSocket gateways on socket.io (`@nestjs/platform-socket.io`) and ws
 * (`@nestjs/platform-ws`). One message is one counted call: its carrier is the argument list
 * of that handler call (`[client, data, …]`), one array per message, shared by every guard of
 * the call (a global guard and `@UseGuards` count it once). The identity is the user on the
 * socket, else the handshake's address; there are no headers; a refusal is a `WsException`
 * whose error is a {@link WsRateLimitError}.
 */
export const wsTransport: Transport = {
  type: 'ws',
  async load() {
    ({ WsException: WsExceptionClass } = await import('@nestjs/websockets'));
  },
  carrier: (ctx) => (clientOf(ctx) === undefined ? undefined : ctx.getArgs()),
  request(ctx) {
    const client = clientOf(ctx);
    return client && handshakeOf(client);
  },
  user(ctx) {
    const client = clientOf(ctx);
    return client && userOnSocket(client);
  },
  args: (ctx) => ctx.getArgByIndex(1),
  // A WebSocket message has no headers: the wait travels in the refusal alone.
  setHeaders() {},
  refuse(_ctx, refusal): never {
    const error = wsErrorOf(refusal);
    // `load` ran before any call reached here; the fallback only keeps `refuse` throwing.
    if (WsExceptionClass) throw new WsExceptionClass(error);
    throw Object.assign(new Error(error.message), { error });
  },
};
