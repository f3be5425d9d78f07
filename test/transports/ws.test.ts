/**
 * WebSocket gateways on socket.io and ws (issue 12, item 3): one message is one counted call,
 * the identity is the user on the socket else the handshake's address, and a refusal reaches
 * the client as Nest's `exception` event with status 429 and the wait in seconds.
 */
import 'reflect-metadata';
import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { UseGuards } from '@nestjs/common';
import {
  MessageBody,
  SubscribeMessage,
  WebSocketGateway,
  type OnGatewayConnection,
} from '@nestjs/websockets';
import type { Redis } from 'ioredis';
import {
  keys,
  RateLimit,
  RateLimitGuard,
  rateLimitContext,
  recordHandshake,
  SkipRateLimit,
} from '../../lib/index.js';
import { disconnect, newRedis } from '../harness/redis.js';
import { createWsApp, sendTimes, WS_PLATFORMS, type WsAppHandle } from './support/ws-app.js';

/** What a client receives for a refusal by a policy whose wait is `retryAfter` seconds. */
const refused = (retryAfter: number) => ({
  event: 'exception',
  data: {
    status: 429,
    error: 'Too Many Requests',
    message: `Too many requests; retry in ${retryAfter} s`,
    retryAfter,
  },
});
const pongs = (...ns: number[]) => ns.map((n) => ({ event: 'pong', data: n }));

/** A socket.io `Socket` or a ws `WebSocket`, as far as authentication reads and writes them. */
type Client = {
  handshake?: { auth?: { user?: unknown } };
  data?: { user?: unknown };
  user?: unknown;
};

/**
 * Authentication as an app does it in `handleConnection`: on socket.io from the handshake's
 * `auth` into `client.data.user`; on ws from the upgrade request's `x-user` header into
 * `client.user` (and the upgrade request handed over, for `X-Forwarded-For`).
 */
function authenticate(client: Client, request?: IncomingMessage): void {
  if (client.handshake) {
    const user = client.handshake.auth?.user;
    if (typeof user === 'string') client.data!.user = { id: user };
    return;
  }
  const user = request?.headers['x-user'];
  if (typeof user === 'string') client.user = { id: user };
  if (request) recordHandshake(client, request);
}

@WebSocketGateway()
class PingGateway implements OnGatewayConnection {
  handleConnection(client: Client, request?: IncomingMessage) {
    authenticate(client, request);
  }

  @SubscribeMessage('ping')
  @RateLimit('3/m')
  ping(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }

  /** The global guard and this one run on every message. */
  @SubscribeMessage('twice')
  @UseGuards(RateLimitGuard)
  @RateLimit('3/m')
  twice(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }

  @SubscribeMessage('bulk')
  @RateLimit('6/m', { cost: (ctx) => rateLimitContext(ctx).args?.items?.length ?? 1 })
  bulk(@MessageBody() body: { items: unknown[] }) {
    return { event: 'pong', data: body.items.length };
  }

  @SubscribeMessage('login')
  @RateLimit('2/m', { key: keys.ip, exposeDetails: false })
  login(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }
}

/** Stacked gateway policies: one budget per handler, one shared by the gateway (`scope`). */
@WebSocketGateway()
@RateLimit('2/m', { name: 'each' })
@RateLimit('3/m', { name: 'room', scope: 'rooms' })
class RoomsGateway implements OnGatewayConnection {
  handleConnection(client: Client, request?: IncomingMessage) {
    authenticate(client, request);
  }

  @SubscribeMessage('join')
  join(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }

  @SubscribeMessage('leave')
  leave(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }

  /** Only the module default is left. */
  @SubscribeMessage('hello')
  @SkipRateLimit('each', 'room')
  hello(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }

  @SubscribeMessage('health')
  @SkipRateLimit()
  health(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }
}

let redis: Redis;
beforeAll(() => {
  redis = newRedis();
});
afterAll(() => disconnect(redis));

describe.each(WS_PLATFORMS)('message handlers on %s', (platform) => {
  let h: WsAppHandle;
  beforeAll(async () => {
    h = await createWsApp(platform, {}, [PingGateway]);
  });
  afterAll(() => h?.close());

  it('3 messages are answered, the 4th refused with status 429 and the wait in seconds', async () => {
    const client = await h.connect({ user: 'alice' });
    expect(await sendTimes(client, 4, 'ping')).toEqual([...pongs(1, 2, 3), refused(20)]);
    // A refusal spends nothing: still refused, and the socket still answers other handlers.
    expect(await client.send('ping', 5)).toEqual(refused(20));
    expect(await client.send('twice', 6)).toEqual(pongs(6)[0]);
    expect(await redis.keys(`${h.prefix}:{user:alice}:PingGateway.ping:*`)).toEqual([
      `${h.prefix}:{user:alice}:PingGateway.ping::tb`,
    ]);
  });

  it('users on the socket have separate budgets', async () => {
    const bob = await h.connect({ user: 'bob' });
    const carol = await h.connect({ user: 'carol' });
    expect(await sendTimes(bob, 4, 'ping')).toEqual([...pongs(1, 2, 3), refused(20)]);
    expect(await sendTimes(carol, 4, 'ping')).toEqual([...pongs(1, 2, 3), refused(20)]);
    // Two sockets of one user share the user's budget.
    const bobAgain = await h.connect({ user: 'bob' });
    expect(await bobAgain.send('ping', 1)).toEqual(refused(20));
  });

  it('anonymous clients are keyed by the handshake address: one budget for every socket from it', async () => {
    const first = await h.connect();
    const second = await h.connect();
    expect(await sendTimes(first, 2, 'ping')).toEqual(pongs(1, 2));
    expect(await sendTimes(second, 2, 'ping')).toEqual([...pongs(1), refused(20)]);
    expect(await redis.keys(`${h.prefix}:{ip:*`)).toEqual([
      `${h.prefix}:{ip:127.0.0.1}:PingGateway.ping::tb`,
    ]);
  });

  it('a message guarded twice (global guard and @UseGuards) counts once', async () => {
    const client = await h.connect({ user: 'dave' });
    expect(await sendTimes(client, 4, 'twice')).toEqual([...pongs(1, 2, 3), refused(20)]);
  });

  it('a cost function reads the message body through rateLimitContext', async () => {
    const client = await h.connect({ user: 'erin' });
    const items = (n: number) => ({ items: new Array(n).fill(0) });
    expect(await client.send('bulk', items(4))).toEqual(pongs(4)[0]);
    // 2 left of 6: 3 items are refused (the wait of one unit, 10 s), 2 are admitted.
    expect(await client.send('bulk', items(3))).toEqual(refused(10));
    expect(await client.send('bulk', items(2))).toEqual(pongs(2)[0]);
  });

  it('exposeDetails: false leaves the wait out of the refusal', async () => {
    const client = await h.connect({ user: 'frank' });
    const replies = await sendTimes(client, 3, 'login');
    expect(replies).toEqual([
      ...pongs(1, 2),
      {
        event: 'exception',
        data: { status: 429, error: 'Too Many Requests', message: 'Too many requests' },
      },
    ]);
  });
});

describe.each(WS_PLATFORMS)('gateway policies and the module default on %s', (platform) => {
  let h: WsAppHandle;
  beforeAll(async () => {
    h = await createWsApp(platform, { default: '4/m' }, [RoomsGateway]);
  });
  afterAll(() => h?.close());

  it('a class-level @RateLimit gives each handler its own budget, and one with `scope` a budget per gateway', async () => {
    const client = await h.connect({ user: 'gina' });
    // `each` (2/m) refuses the third join, with its wait of 30 s.
    expect(await sendTimes(client, 3, 'join')).toEqual([...pongs(1, 2), refused(30)]);
    // `room` (3/m, scope rooms) has one unit left for leave: the second is refused, 20 s.
    expect(await sendTimes(client, 2, 'leave')).toEqual([...pongs(1), refused(20)]);
    expect((await redis.keys(`${h.prefix}:{user:gina}:*`)).sort()).toEqual([
      `${h.prefix}:{user:gina}:::tb`,
      `${h.prefix}:{user:gina}:RoomsGateway.join:each:tb`,
      `${h.prefix}:{user:gina}:RoomsGateway.leave:each:tb`,
      `${h.prefix}:{user:gina}:rooms:room:tb`,
    ]);
  });

  it('the module default applies to WebSocket handlers (scope global)', async () => {
    const client = await h.connect({ user: 'hal' });
    expect(await sendTimes(client, 5, 'hello')).toEqual([...pongs(1, 2, 3, 4), refused(15)]);
    expect(await sendTimes(client, 5, 'health')).toEqual(pongs(1, 2, 3, 4, 5));
  });
});

describe.each(WS_PLATFORMS)('trustedProxies on %s', (platform) => {
  let h: WsAppHandle;
  beforeAll(async () => {
    h = await createWsApp(platform, { trustedProxies: 1 }, [PingGateway]);
  });
  afterAll(() => h?.close());

  it('X-Forwarded-For of the handshake names the client, as on HTTP', async () => {
    const a = await h.connect({ headers: { 'x-forwarded-for': '198.51.100.1, 203.0.113.7' } });
    const b = await h.connect({ headers: { 'x-forwarded-for': '203.0.113.8' } });
    expect(await sendTimes(a, 4, 'ping')).toEqual([...pongs(1, 2, 3), refused(20)]);
    expect(await sendTimes(b, 1, 'ping')).toEqual(pongs(1));
    expect((await redis.keys(`${h.prefix}:{ip:*`)).sort()).toEqual([
      `${h.prefix}:{ip:203.0.113.7}:PingGateway.ping::tb`,
      `${h.prefix}:{ip:203.0.113.8}:PingGateway.ping::tb`,
    ]);
  });
});
