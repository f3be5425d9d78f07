/**
 * Microservices (issue 12, item 4): a real Nest microservice on TCP and a real TCP
 * `ClientProxy`. A message handler answers its limit, then the client's `send()` errors with
 * the status and the wait; a refused event is dropped, logged once as `rate_limit.blocked`
 * and never as an error; the identity is the peer address or a key over the payload; a
 * message guarded twice counts once; no context shape gets a TypeError.
 */
import 'reflect-metadata';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Injectable,
  Module,
  UseGuards,
  type CanActivate,
  type INestMicroservice,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExecutionContextHost } from '@nestjs/core/internal';
import {
  ClientProxyFactory,
  EventPattern,
  MessagePattern,
  Payload,
  RpcException,
  Transport,
  type ClientProxy,
  type TcpContext,
} from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import {
  RateLimit,
  RateLimitGuard,
  RateLimitModule,
  rateLimitContext,
  type RateLimitContext,
  type RateLimitModuleOptions,
} from '../../lib/index.js';
import { CapturingLogger, pollUntil, uniquePrefix } from '../e2e/support/app.js';
import { disconnect, newRedis, redisUrl, startRedisServer } from '../harness/redis.js';

const readme = readFileSync(new URL('../../docs/guides/microservices.md', import.meta.url), 'utf8');

/** The README's microservice recipe, as written there; `ReportsController` below uses it verbatim. */
const RECIPE =
  "@RateLimit('1/m', { key: (ctx) => `tenant:${rateLimitContext(ctx).args.tenantId}` })";

@Controller()
class ReportsController {
  @MessagePattern('reports.generate')
  @RateLimit('1/m', { key: (ctx) => `tenant:${rateLimitContext(ctx).args.tenantId}` })
  generate(@Payload() data: { tenantId: string }) {
    return { tenantId: data.tenantId, status: 'queued' };
  }
}

/** Refuses every call: what Nest does with an event whose guard says no. */
@Injectable()
class DenyAll implements CanActivate {
  canActivate(): boolean {
    return false;
  }
}

const handled: number[] = [];
const seen: { context: RateLimitContext; pattern: string }[] = [];

@Controller()
class MathController {
  @MessagePattern('sum')
  @RateLimit('2/m')
  sum(@Payload() numbers: number[]) {
    return numbers.reduce((a, b) => a + b, 0);
  }

  @MessagePattern('twice')
  @UseGuards(RateLimitGuard)
  @RateLimit('2/m')
  twice() {
    return 'ok';
  }

  @MessagePattern('hidden')
  @RateLimit('1/m', { exposeDetails: false })
  hidden() {
    return 'ok';
  }

  @MessagePattern('whoami')
  @RateLimit('5/m', {
    key: (ctx) => {
      seen.push({
        context: rateLimitContext(ctx),
        pattern: ctx.switchToRpc().getContext<TcpContext>().getPattern(),
      });
      return undefined;
    },
  })
  whoami() {
    return 'you';
  }

  /** For contexts built by hand: never called over the wire. */
  @MessagePattern('shapes')
  @RateLimit('3/m')
  shapes() {
    return 'ok';
  }

  @EventPattern('audit')
  @RateLimit('2/m')
  record(@Payload() entry: { n: number }) {
    handled.push(entry.n);
  }

  @EventPattern('audit.denied')
  @UseGuards(DenyAll)
  denied(@Payload() _entry: unknown) {
    handled.push(-1);
  }
}

interface Microservice {
  app: INestMicroservice;
  client: ClientProxy;
  prefix: string;
  close(): Promise<void>;
}

/** A TCP microservice on 127.0.0.1 (port 0) with the module, and a connected TCP client. */
async function startMicroservice(
  options: RateLimitModuleOptions,
  controllers: Type[],
  logger: CapturingLogger | false = false,
): Promise<Microservice> {
  const prefix = uniquePrefix();
  @Module({
    imports: [RateLimitModule.forRoot({ redis: redisUrl(), timeoutMs: 2000, ...options, prefix })],
    controllers,
  })
  class RpcModule {}
  const app = await NestFactory.createMicroservice(RpcModule, {
    transport: Transport.TCP,
    options: { host: '127.0.0.1', port: 0 },
    logger,
    abortOnError: false,
  });
  await app.listen();
  const { port } = app.unwrap<NetServer>().address() as AddressInfo;
  const client = ClientProxyFactory.create({
    transport: Transport.TCP,
    options: { host: '127.0.0.1', port },
  });
  await client.connect();
  return {
    app,
    client,
    prefix,
    close: async () => {
      await client.close();
      await app.close();
    },
  };
}

/** What `send()` gave: the answer, or the error its observable raised. */
async function answer(client: ClientProxy, pattern: string, data: unknown): Promise<unknown> {
  return lastValueFrom(client.send<unknown>(pattern, data)).catch((error: unknown) => ({
    error,
  }));
}

let redis: Redis;
beforeAll(() => {
  redis = newRedis();
});
afterAll(() => disconnect(redis));

it('the docs holds the microservice recipe exactly as this suite runs it', () => {
  expect(readme).toContain(RECIPE);
});

describe('a TCP microservice', () => {
  const logger = new CapturingLogger();
  let ms: Microservice;
  beforeAll(async () => {
    ms = await startMicroservice({}, [MathController, ReportsController], logger);
  });
  afterAll(() => ms?.close());

  it('reports nothing at bootstrap: every limited handler has an address or a key on TCP', () => {
    expect(logger.matching('rate_limit.unenforced')).toEqual([]);
  });

  it('answers 2 of @RateLimit("2/m"), then send() errors with the status and the wait', async () => {
    const replies = [];
    for (let i = 0; i < 4; i++) replies.push(await answer(ms.client, 'sum', [i, 1]));
    expect(replies.slice(0, 2)).toEqual([1, 2]);
    const refusal = {
      status: 429,
      error: 'Too Many Requests',
      message: 'Too many requests; retry in 30 s',
      retryAfter: 30,
    };
    expect(replies.slice(2)).toEqual([{ error: refusal }, { error: refusal }]);
    // The default identity on TCP is the peer's address.
    expect(await redis.keys(`${ms.prefix}:*`)).toEqual([
      expect.stringMatching(
        new RegExp(`^${ms.prefix}:\\{ip:127\\.0\\.0\\.1\\}:MathController\\.sum::`),
      ),
    ]);
  });

  it('exposeDetails: false leaves the wait out of the refusal', async () => {
    expect(await answer(ms.client, 'hidden', {})).toBe('ok');
    expect(await answer(ms.client, 'hidden', {})).toEqual({
      error: { status: 429, error: 'Too Many Requests', message: 'Too many requests' },
    });
  });

  it('the docs recipe: a key over the payload gives each tenant its own budget', async () => {
    const generate = (tenantId: string) => answer(ms.client, 'reports.generate', { tenantId });
    expect(await generate('acme')).toEqual({ tenantId: 'acme', status: 'queued' });
    expect(await generate('acme')).toEqual({
      error: expect.objectContaining({ status: 429, retryAfter: 60 }),
    });
    expect(await generate('globex')).toEqual({ tenantId: 'globex', status: 'queued' });
    expect((await redis.keys(`${ms.prefix}:{tenant:*`)).sort()).toEqual([
      expect.stringMatching(`^${ms.prefix}:\\{tenant:acme\\}:ReportsController\\.generate:`),
      expect.stringMatching(`^${ms.prefix}:\\{tenant:globex\\}:ReportsController\\.generate:`),
    ]);
  });

  it('key functions get the payload as args, the peer as request, and the transport context', async () => {
    seen.length = 0;
    expect(await answer(ms.client, 'whoami', { hello: 'world' })).toBe('you');
    expect(seen).toEqual([
      {
        context: {
          transport: 'rpc',
          request: { ip: '127.0.0.1', headers: {} },
          user: undefined,
          args: { hello: 'world' },
        },
        pattern: 'whoami',
      },
    ]);
    // A key that answers nothing falls back to the address.
    expect(await redis.keys(`${ms.prefix}:{ip:127.0.0.1}:MathController.whoami:*`)).toHaveLength(1);
  });

  it('a message guarded twice (global guard and @UseGuards) counts once', async () => {
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await answer(ms.client, 'twice', {}));
    expect(replies).toEqual([
      'ok',
      'ok',
      { error: expect.objectContaining({ status: 429, retryAfter: 30 }) },
    ]);
  });

  it('a refused event is dropped and logged as rate_limit.blocked, never as an error', async () => {
    handled.length = 0;
    logger.clear();
    for (let n = 1; n <= 4; n++) ms.client.emit('audit', { n });
    await lastValueFrom(ms.client.emit('audit', { n: 5 }));
    // The second refusal is held back by the throttle: one line, counted later.
    expect(
      await pollUntil(async () => logger.matching('rate_limit.blocked').length === 1, 5000),
    ).toBe(true);
    expect(await pollUntil(async () => handled.length === 2, 5000)).toBe(true);
    // A round trip after the events: anything they were still to log is logged by now.
    expect(await answer(ms.client, 'sum', [0])).toEqual({ error: expect.anything() });
    expect(handled.sort()).toEqual([1, 2]);
    const [line] = logger.matching('rate_limit.blocked');
    expect(JSON.parse(line!.slice('rate_limit.blocked '.length))).toMatchObject({
      route: 'MathController.record',
      policies: ['default'],
      count: 1,
    });
    expect(logger.lines.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('whereas an event whose guard returns false is logged by Nest as an error', async () => {
    logger.clear();
    await lastValueFrom(ms.client.emit('audit.denied', {}));
    expect(
      await pollUntil(
        async () => logger.lines.some((l) => l.level === 'error' && /Forbidden/.test(l.message)),
        5000,
      ),
    ).toBe(true);
    expect(handled).not.toContain(-1);
  });

  it('no RPC context shape gets a TypeError: without an address, limited as ip:unknown', async () => {
    const guard = ms.app.get(RateLimitGuard);
    const shapes: unknown[][] = [
      [],
      [undefined],
      [42, null],
      [{}, { getSocketRef: () => ({}) }],
      [
        {},
        {
          getSocketRef: () => {
            throw new TypeError('not a TCP context');
          },
        },
      ],
    ];
    const outcomes = [];
    for (const args of shapes) {
      const ctx = new ExecutionContextHost(args, MathController, MathController.prototype.shapes);
      ctx.setType('rpc');
      outcomes.push(
        await guard.canActivate(ctx).catch((error: unknown) => {
          if (error instanceof RpcException) return (error.getError() as { status: number }).status;
          throw error;
        }),
      );
    }
    expect(outcomes).toEqual([true, true, true, 429, 429]);
    expect(await redis.keys(`${ms.prefix}:{ip:unknown}:MathController.shapes:*`)).toHaveLength(1);
  });
});

describe('a TCP microservice whose Redis is down', () => {
  @Controller()
  class ClosedController {
    @MessagePattern('closed')
    @RateLimit('5/m', { failClosed: true })
    closed() {
      return 'ok';
    }

    @MessagePattern('open')
    @RateLimit('5/m')
    open() {
      return 'ok';
    }
  }

  it('refuses a fail-closed message with status 503 and admits a fail-open one', async () => {
    const server = await startRedisServer();
    // A client of our own that never reconnects: the module leaves it to us to close.
    const client = new Redis(server.url, {
      autoResendUnfulfilledCommands: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    await once(client, 'ready');
    const ms = await startMicroservice({ redis: client, timeoutMs: 200 }, [ClosedController]);
    try {
      expect(await answer(ms.client, 'closed', {})).toBe('ok');
      await server.kill();
      expect(await answer(ms.client, 'closed', {})).toEqual({
        error: {
          status: 503,
          error: 'Service Unavailable',
          message: 'Rate limiting is unavailable; retry shortly',
          retryAfter: 1,
        },
      });
      expect(await answer(ms.client, 'open', {})).toBe('ok');
    } finally {
      await ms.close();
      disconnect(client);
      await server.kill();
    }
  });
});
