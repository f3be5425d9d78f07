/**
 * Overload protection (the `overload` option) on messages: a TCP microservice with a real
 * `ClientProxy`, and WebSocket gateways on socket.io and ws. A shed message is refused in the
 * transport's shape, status 503 and a wait of 1 s, and spends no rate-limit budget; a critical
 * one is admitted; a held message's slot is given back when its handler settles. The limit is
 * fixed at 2 calls in flight and saturated by handlers the test holds.
 */
import 'reflect-metadata';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module, type INestMicroservice, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  ClientProxyFactory,
  MessagePattern,
  Transport,
  type ClientProxy,
} from '@nestjs/microservices';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import type { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { Priority, RateLimit, RateLimitModule } from '../../lib/index.js';
import { RoutePlanner } from '../../lib/nest/plan/planner.js';
import { pollUntil, uniquePrefix } from '../e2e/support/app.js';
import { disconnect, newRedis, redisUrl } from '../harness/redis.js';
import { createWsApp, WS_PLATFORMS, type WsAppHandle } from './support/ws-app.js';

let waiting: (() => void)[] = [];
const held = () => new Promise<void>((resolve) => waiting.push(resolve));
const open = () => {
  for (const resolve of waiting.splice(0)) resolve();
};

const FIXED = { initialLimit: 2, minLimit: 2, maxLimit: 2, maxEventLoopDelayMs: false } as const;

/** The body of a shed call, as every transport carries it. */
const SHED = {
  status: 503,
  error: 'Service Unavailable',
  message: 'The server is overloaded; retry shortly',
  retryAfter: 1,
};

/** Calls in flight in the app's process pool. */
const inFlight = (app: { get: INestMicroservice['get'] }) =>
  app.get(RoutePlanner, { strict: false }).overload!.protection.pool()!.inFlightTotal;

let redis: Redis;
beforeAll(() => {
  redis = newRedis();
});
afterAll(() => disconnect(redis));

@Controller()
@Priority('sheddable')
class LoadController {
  @MessagePattern('hold')
  async hold() {
    await held();
    return 'held';
  }

  @MessagePattern('limited')
  @RateLimit('3/m', { key: () => 'one-client' })
  limited() {
    return 'ok';
  }

  @MessagePattern('critical')
  @Priority('critical')
  critical() {
    return 'ok';
  }
}

/** What `send()` gave: the answer, or the error its observable raised. */
function answer(client: ClientProxy, pattern: string): Promise<unknown> {
  return lastValueFrom(client.send<unknown>(pattern, {})).catch((error: unknown) => ({ error }));
}

describe('a TCP microservice', () => {
  let app: INestMicroservice;
  let client: ClientProxy;
  const prefix = uniquePrefix();
  beforeAll(async () => {
    @Module({
      imports: [
        RateLimitModule.forRoot({ redis: redisUrl(), timeoutMs: 2000, prefix, overload: FIXED }),
      ],
      controllers: [LoadController] as Type[],
    })
    class RpcModule {}
    app = await NestFactory.createMicroservice(RpcModule, {
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port: 0 },
      logger: false,
      abortOnError: false,
    });
    await app.listen();
    const { port } = app.unwrap<NetServer>().address() as AddressInfo;
    client = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
    await client.connect();
  });
  afterAll(async () => {
    await client?.close();
    await app?.close();
  });

  it('refuses a message at the limit with 503 and a wait of 1 s, spending no budget; admits a critical one', async () => {
    waiting = [];
    const holds = [answer(client, 'hold'), answer(client, 'hold')];
    expect(await pollUntil(async () => waiting.length === 2, 10_000)).toBe(true);

    expect(await answer(client, 'limited')).toEqual({ error: SHED });
    expect(await redis.keys(`${prefix}:*one-client*`)).toEqual([]);
    expect(await answer(client, 'critical')).toBe('ok');

    open();
    expect(await Promise.all(holds)).toEqual(['held', 'held']);
    // Given back as each handler settled, before its answer was sent.
    expect(inFlight(app)).toBe(0);
    expect(await answer(client, 'limited')).toBe('ok');
    expect(await redis.keys(`${prefix}:*one-client*`)).toHaveLength(1);
  });
});

@WebSocketGateway()
@Priority('sheddable')
class LoadGateway {
  @SubscribeMessage('hold')
  async hold() {
    await held();
    return { event: 'held', data: 'held' };
  }

  @SubscribeMessage('limited')
  @RateLimit('3/m', { key: () => 'one-client' })
  limited(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }

  @SubscribeMessage('critical')
  @Priority('critical')
  critical(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }
}

describe.each(WS_PLATFORMS)('WebSocket messages on %s', (platform) => {
  let h: WsAppHandle;
  beforeAll(async () => {
    h = await createWsApp(platform, { overload: FIXED }, [LoadGateway]);
  });
  afterAll(() => h?.close());

  it("refuses a message at the limit with Nest's exception event, 503 and a wait of 1 s, spending no budget; admits a critical one", async () => {
    waiting = [];
    const [first, second, other] = await Promise.all([h.connect(), h.connect(), h.connect()]);
    const holds = [first!.send('hold'), second!.send('hold')];
    expect(await pollUntil(async () => waiting.length === 2, 10_000)).toBe(true);

    expect(await other!.send('limited', 1)).toEqual({ event: 'exception', data: SHED });
    expect(await redis.keys(`${h.prefix}:*one-client*`)).toEqual([]);
    expect(await other!.send('critical', 2)).toEqual({ event: 'pong', data: 2 });

    open();
    expect(await Promise.all(holds)).toEqual([
      { event: 'held', data: 'held' },
      { event: 'held', data: 'held' },
    ]);
    expect(inFlight(h.app)).toBe(0);
    expect(await other!.send('limited', 3)).toEqual({ event: 'pong', data: 3 });
    expect(await redis.keys(`${h.prefix}:*one-client*`)).toHaveLength(1);
  });
});
