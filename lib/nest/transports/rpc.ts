import type { ExecutionContext } from '@nestjs/common';
import type { RequestLike } from '../../http/ip.js';
import { NEST_METADATA } from '../declare/metadata.js';
import { refusalFields } from './refusal.js';
import type { Transport } from './transport.js';

/**
 * What a refused microservice call receives: the `RpcException`'s error, which Nest sends to
 * the client as it is (a TCP `ClientProxy`'s `send()` observable errors with this object).
 */
export interface RpcRefusal {
  /** 429: a policy refused; 503: a fail-closed policy's store is down. */
  status: 429 | 503;
  error: 'Too Many Requests' | 'Service Unavailable';
  message: string;
  /** The wait in **seconds**; absent when `exposeDetails: false` or it can never be admitted. */
  retryAfter?: number;
}

/** `PatternHandler.EVENT` of `@nestjs/microservices`. */
const EVENT_HANDLER = 2;

type ErrorClass = new (error: RpcRefusal) => Error;

/** `RpcException`, once `load` has imported `@nestjs/microservices`. */
let RpcException: ErrorClass | undefined;
/** What a refused event throws, once `load` has run; see {@link quietDrop}. */
let EventDropped: ErrorClass | undefined;

/**
 * The error that drops a refused event without an error stack in the logs. An event has no
 * reply to carry a refusal, and Nest 12 logs any `RpcException` from an event handler as an
 * error (returning false from the guard throws one too); an `IntrinsicException` is the one
 * error its exception filter passes over in silence. The refusal is logged once as
 * `rate_limit.blocked` by the shape stage instead. `IntrinsicException` is public from Nest 11;
 * before it, Nest logs no `RpcException` from an event, so that serves.
 */
function quietDrop(
  intrinsic: (new (message?: string) => Error) | undefined,
  fallback: ErrorClass,
): ErrorClass {
  if (intrinsic === undefined) return fallback;
  return class RateLimitedEvent extends intrinsic {
    constructor(readonly error: RpcRefusal) {
      super(error.message);
    }
    /** As `RpcException.getError()`, for exception filters that catch everything. */
    getError(): RpcRefusal {
      return this.error;
    }
  };
}

/** The synthetic request of each TCP socket: its address does not change. */
const peers = new WeakMap<object, RequestLike>();
const NO_HEADERS: RequestLike['headers'] = Object.freeze({}) as RequestLike['headers'];

type TcpContextLike = {
  getSocketRef?: () => { socket?: { remoteAddress?: string }; netSocket?: unknown } | undefined;
};

/**
 * The caller's address on TCP, as a request `keys.ip` reads (`{ ip, headers: {} }`): the
 * `TcpContext`'s socket. Undefined on transports that give no address (NATS, Redis, MQTT,
 * RabbitMQ, Kafka, gRPC, custom strategies).
 */
function peerOf(ctx: ExecutionContext): RequestLike | undefined {
  const context = ctx.getArgByIndex<TcpContextLike | undefined>(1);
  if (typeof context !== 'object' || context === null) return undefined;
  if (typeof context.getSocketRef !== 'function') return undefined;
  try {
    const socket = context.getSocketRef()?.socket;
    if (typeof socket !== 'object' || socket === null) return undefined;
    let peer = peers.get(socket);
    if (peer === undefined) {
      const ip = socket.remoteAddress;
      if (typeof ip !== 'string') return undefined;
      peer = { ip, headers: NO_HEADERS };
      peers.set(socket, peer);
    }
    return peer;
  } catch {
    // A context that only looks like TCP's: no address.
    return undefined;
  }
}

/**
 * Microservices (`@MessagePattern`, `@EventPattern`, on any transport): one message or event
 * is one counted call, its arguments array the carrier; the payload is `args`; the identity
 * comes from a key function over the payload and the transport context
 * (`ctx.switchToRpc().getContext()`), else from the caller's address on TCP. A refused message
 * gets an `RpcException` with an {@link RpcRefusal}; a refused event is dropped quietly.
 */
export const rpcTransport: Transport = {
  type: 'rpc',
  async load() {
    const [microservices, common] = await Promise.all([
      import('@nestjs/microservices'),
      import('@nestjs/common'),
    ]);
    RpcException = microservices.RpcException as unknown as ErrorClass;
    const intrinsic = (common as { IntrinsicException?: new (message?: string) => Error })
      .IntrinsicException;
    EventDropped = quietDrop(intrinsic, RpcException);
  },
  // The arguments array is made afresh for each call of a handler and shared by all its
  // guards: a message guarded twice counts once, two handlers of one event count apart.
  carrier: (ctx) => {
    const args: unknown = ctx.getArgs();
    return Array.isArray(args) ? args : undefined;
  },
  request: peerOf,
  user: () => undefined,
  args: (ctx) => ctx.getArgByIndex(0),
  setHeaders: () => undefined,
  refuse(ctx, refused): never {
    const refusal: RpcRefusal = refusalFields(refused);
    const { message } = refusal;
    const handler: unknown = ctx.getHandler();
    const event =
      typeof handler === 'function' &&
      Reflect.getMetadata(NEST_METADATA.patternHandler, handler) === EVENT_HANDLER;
    const Refusal = event ? EventDropped : RpcException;
    if (Refusal === undefined) throw new Error(`rate limited: ${message}`);
    throw new Refusal(refusal);
  },
};
