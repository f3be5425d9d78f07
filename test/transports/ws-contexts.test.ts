/**
 * The WebSocket adapter on contexts of every shape (issue 12, item 3): what user functions
 * read through rateLimitContext on socket.io and ws clients, and a guard that answers any
 * `ws` context without a TypeError.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ExecutionContext } from '@nestjs/common';
import { SubscribeMessage, WebSocketGateway, WsException } from '@nestjs/websockets';
import { RateLimit, RateLimitGuard, rateLimitContext, recordHandshake } from '../../lib/index.js';
import { CapturingLogger } from '../e2e/support/app.js';
import { disconnect, newRedis } from '../harness/redis.js';
import { createWsApp, type WsAppHandle } from './support/ws-app.js';

@WebSocketGateway()
class ShapesGateway {
  @SubscribeMessage('ping')
  @RateLimit('2/m')
  ping() {
    return 'pong';
  }
}

/** A `ws` ExecutionContext holding `args` (`[client, data, …]`), as Nest builds one per message. */
function contextOf(args: unknown[]): ExecutionContext {
  return {
    getType: () => 'ws',
    getClass: () => ShapesGateway,
    getHandler: () => ShapesGateway.prototype.ping,
    getArgs: () => args,
    getArgByIndex: (i: number) => args[i],
  } as unknown as ExecutionContext;
}

/** The guard's answer: true, or the WsException's error. */
async function answerOf(guard: RateLimitGuard, args: unknown[]): Promise<unknown> {
  try {
    return await guard.canActivate(contextOf(args));
  } catch (error) {
    if (error instanceof WsException) return error.getError();
    throw error;
  }
}

describe('rateLimitContext on a ws context', () => {
  it('socket.io: the handshake, the user in client.data, the message body', () => {
    const client = {
      handshake: { address: '::ffff:203.0.113.5', headers: { 'x-api-key': 'k1' } },
      data: { user: { id: 'u1' } },
    };
    expect(rateLimitContext(contextOf([client, { items: [1] }, 'ping']))).toEqual({
      transport: 'ws',
      request: { headers: { 'x-api-key': 'k1' }, socket: { remoteAddress: '::ffff:203.0.113.5' } },
      user: { id: 'u1' },
      args: { items: [1] },
    });
  });

  it('ws: the TCP peer without headers, or the upgrade request handed to recordHandshake', () => {
    const client = { readyState: 1, _socket: { remoteAddress: '203.0.113.6' }, user: { id: 'w' } };
    expect(rateLimitContext(contextOf([client, 7]))).toEqual({
      transport: 'ws',
      request: { headers: {}, socket: { remoteAddress: '203.0.113.6' } },
      user: { id: 'w' },
      args: 7,
    });
    const recorded = { readyState: 1, _socket: { remoteAddress: '10.0.0.2' } };
    recordHandshake(recorded, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(rateLimitContext(contextOf([recorded])).request).toEqual({
      headers: { 'x-forwarded-for': '203.0.113.9' },
      socket: { remoteAddress: '10.0.0.2' },
    });
  });

  it('the user: client.data.user, else client.user, else client.request.user (Passport on socket.io)', () => {
    const userOf = (client: object) => rateLimitContext(contextOf([client])).user;
    expect(userOf({ data: { user: 'a' }, user: 'b', request: { user: 'c' } })).toBe('a');
    expect(userOf({ data: {}, user: 'b', request: { user: 'c' } })).toBe('b');
    expect(userOf({ data: {}, request: { user: 'c' } })).toBe('c');
    expect(userOf({ data: null, request: null })).toBeUndefined();
  });

  it('a context without a client: nothing', () => {
    expect(rateLimitContext(contextOf([undefined, 'x']))).toEqual({
      transport: 'ws',
      request: undefined,
      user: undefined,
      args: 'x',
    });
  });
});

describe('the guard on ws contexts of every shape', () => {
  const logger = new CapturingLogger();
  let h: WsAppHandle;
  let guard: RateLimitGuard;
  beforeAll(async () => {
    h = await createWsApp('socket.io', { trustedProxies: 1 }, [ShapesGateway], { logger });
    guard = h.app.get(RateLimitGuard);
  });
  afterAll(() => h?.close());

  it('arguments without a client pass untouched', async () => {
    for (const args of [[], [undefined], [null], ['text', 42]]) {
      for (let i = 0; i < 3; i++) expect(await answerOf(guard, args)).toBe(true);
    }
  });

  it('a client with neither handshake nor socket is limited, as ip:unknown', async () => {
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await answerOf(guard, [{}, null]));
    expect(answers).toEqual([
      true,
      true,
      { status: 429, error: 'Too Many Requests', message: expect.any(String), retryAfter: 30 },
    ]);
    const redis = newRedis();
    try {
      expect(await redis.keys(`${h.prefix}:*`)).toEqual([
        `${h.prefix}:{ip:unknown}:ShapesGateway.ping::tb`,
      ]);
    } finally {
      disconnect(redis);
    }
  });

  it('a client whose handshake cannot be read is admitted and logged, not a TypeError', async () => {
    logger.clear();
    const client = {
      get handshake(): never {
        throw new TypeError('no handshake');
      },
    };
    for (let i = 0; i < 3; i++) expect(await answerOf(guard, [client, 1])).toBe(true);
    expect(logger.matching('rate_limit.config_error')).toEqual([
      expect.stringContaining('"route":"transport ws"'),
    ]);
  });

  it('one argument list is one message: guarded again, it is not counted again', async () => {
    const args = [{ handshake: { address: '203.0.113.30', headers: {} } }, 1];
    for (let i = 0; i < 5; i++) expect(await answerOf(guard, args)).toBe(true);
  });
});
