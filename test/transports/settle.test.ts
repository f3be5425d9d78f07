/**
 * Where no HTTP response tells when a call ends (GraphQL resolvers, WebSocket messages,
 * microservice messages), concurrency slots are given back and `count` policies settled once
 * the handler's result settles (issue 15): a success as status 200, a thrown error as failed.
 */
import 'reflect-metadata';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module, type INestMicroservice } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Args, Query, Resolver } from '@nestjs/graphql';
import {
  ClientProxyFactory,
  MessagePattern,
  Payload,
  RpcException,
  Transport,
  type ClientProxy,
} from '@nestjs/microservices';
import { MessageBody, SubscribeMessage, WebSocketGateway, WsException } from '@nestjs/websockets';
import { lastValueFrom } from 'rxjs';
import {
  ConcurrencyLimit,
  RateLimit,
  RateLimitModule,
  RateLimitService,
  type PolicyInput,
} from '../../lib/index.js';
import { pollUntil, uniquePrefix } from '../e2e/support/app.js';
import { redisUrl } from '../harness/redis.js';
import { createGraphQLApp } from './support/graphql.js';
import { createWsApp } from './support/ws-app.js';

const slot = (scope: string): PolicyInput => ({ name: 'concurrent', concurrent: 1, scope });
const login = (scope: string): PolicyInput => ({ rate: '3/m', scope });

/** Waits until `identity` has `expected` left under `policy` (a release or refund lands after the answer). */
const leftUntil = (
  service: RateLimitService,
  identity: string,
  policy: PolicyInput,
  expected: number,
) =>
  pollUntil(
    async () => (await service.peek(identity, [policy])).policies[0]!.remaining === expected,
    2000,
  );

@Controller()
class RpcController {
  @MessagePattern('slot')
  @ConcurrencyLimit(1, { key: () => 'rpc' })
  slot(@Payload() fail: boolean) {
    if (fail) throw new RpcException('no');
    return 'ok';
  }

  @MessagePattern('login')
  @RateLimit('3/m', { key: () => 'rpc', count: 'failed' })
  login(@Payload() right: boolean) {
    if (!right) throw new RpcException('wrong password');
    return 'welcome';
  }
}

describe('a TCP microservice', () => {
  let app: INestMicroservice;
  let client: ClientProxy;
  let service: RateLimitService;
  const send = (pattern: string, data: unknown) =>
    lastValueFrom(client.send<string>(pattern, data)).catch((error: { message?: string }) => ({
      error: error.message,
    }));
  beforeAll(async () => {
    @Module({
      imports: [RateLimitModule.forRoot({ redis: redisUrl(), prefix: uniquePrefix() })],
      controllers: [RpcController],
    })
    class RpcModule {}
    app = await NestFactory.createMicroservice(RpcModule, {
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port: 0 },
      logger: false,
    });
    await app.listen();
    const { port } = app.unwrap<NetServer>().address() as AddressInfo;
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: { port } });
    await client.connect();
    service = app.get(RateLimitService);
  });
  afterAll(async () => {
    await client.close();
    await app.close();
  });

  it('gives the slot back once the message handler answers, and once it throws', async () => {
    expect(await send('slot', false)).toBe('ok');
    expect(await leftUntil(service, 'rpc', slot('RpcController.slot'), 1)).toBe(true);
    expect(await send('slot', true)).toEqual({ error: 'no' });
    expect(await leftUntil(service, 'rpc', slot('RpcController.slot'), 1)).toBe(true);
    expect(await send('slot', false)).toBe('ok');
  });

  it("count: 'failed' refunds a message that succeeds and keeps one that throws", async () => {
    expect(await send('login', true)).toBe('welcome');
    expect(await leftUntil(service, 'rpc', login('RpcController.login'), 3)).toBe(true);
    expect(await send('login', false)).toEqual({ error: 'wrong password' });
    expect((await service.peek('rpc', [login('RpcController.login')])).policies[0]!.remaining).toBe(
      2,
    );
  });
});

@WebSocketGateway()
class SlotGateway {
  @SubscribeMessage('slot')
  @ConcurrencyLimit(1, { key: () => 'ws' })
  slot(@MessageBody() fail: boolean) {
    if (fail) throw new WsException('no');
    return { event: 'pong', data: 'ok' };
  }

  @SubscribeMessage('login')
  @RateLimit('3/m', { key: () => 'ws', count: 'failed' })
  login(@MessageBody() right: boolean) {
    if (!right) throw new WsException('wrong password');
    return { event: 'pong', data: 'welcome' };
  }
}

describe('a socket.io gateway', () => {
  it('gives the slot back after each message, answered or thrown; count: failed refunds successes only', async () => {
    const h = await createWsApp('socket.io', {}, [SlotGateway]);
    try {
      const service = h.app.get(RateLimitService);
      const client = await h.connect();
      expect(await client.send('slot', false)).toEqual({ event: 'pong', data: 'ok' });
      expect(await leftUntil(service, 'ws', slot('SlotGateway.slot'), 1)).toBe(true);
      expect((await client.send('slot', true)).event).toBe('exception');
      expect(await leftUntil(service, 'ws', slot('SlotGateway.slot'), 1)).toBe(true);
      expect(await client.send('slot', false)).toEqual({ event: 'pong', data: 'ok' });

      expect(await client.send('login', true)).toEqual({ event: 'pong', data: 'welcome' });
      expect(await leftUntil(service, 'ws', login('SlotGateway.login'), 3)).toBe(true);
      expect((await client.send('login', false)).event).toBe('exception');
      const left = await service.peek('ws', [login('SlotGateway.login')]);
      expect(left.policies[0]!.remaining).toBe(2);
    } finally {
      await h.close();
    }
  });
});

@Resolver()
class SlotResolver {
  @Query(() => String)
  @ConcurrencyLimit(1, { key: () => 'gql' })
  slot(@Args('fail') fail: boolean) {
    if (fail) throw new Error('no');
    return 'ok';
  }

  @Query(() => String)
  @RateLimit('3/m', { key: () => 'gql', count: 'failed' })
  login(@Args('right') right: boolean) {
    if (!right) throw new Error('wrong password');
    return 'welcome';
  }
}

describe('a GraphQL resolver (Apollo)', () => {
  it('gives the slot back after each query, answered or thrown; count: failed refunds successes only', async () => {
    const h = await createGraphQLApp('apollo', { providers: [SlotResolver] });
    try {
      const service = h.app.get(RateLimitService);
      expect((await h.query('{ slot(fail: false) }')).data).toEqual({ slot: 'ok' });
      expect(await leftUntil(service, 'gql', slot('SlotResolver.slot'), 1)).toBe(true);
      expect((await h.query('{ slot(fail: true) }')).errors?.[0]?.message).toBe('no');
      expect(await leftUntil(service, 'gql', slot('SlotResolver.slot'), 1)).toBe(true);
      expect((await h.query('{ slot(fail: false) }')).data).toEqual({ slot: 'ok' });

      expect((await h.query('{ login(right: true) }')).data).toEqual({ login: 'welcome' });
      expect(await leftUntil(service, 'gql', login('SlotResolver.login'), 3)).toBe(true);
      expect((await h.query('{ login(right: false) }')).errors?.[0]?.message).toBe(
        'wrong password',
      );
      const left = await service.peek('gql', [login('SlotResolver.login')]);
      expect(left.policies[0]!.remaining).toBe(2);
    } finally {
      await h.close();
    }
  });
});
