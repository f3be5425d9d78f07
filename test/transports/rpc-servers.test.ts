/**
 * Microservice servers (issue 12, items 4 and 5): on a transport that gives no caller address
 * (here a custom one, as `CustomTransportStrategy` allows), a handler identified by address is
 * reported at bootstrap ("give it a key"), since its callers would share one budget; and a
 * hybrid app's microservice is limited only when it inherits the app's global guards.
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  BaseRpcContext,
  ClientProxyFactory,
  MessagePattern,
  Server,
  Transport,
  type ClientProxy,
  type CustomTransportStrategy,
} from '@nestjs/microservices';
import { isObservable, lastValueFrom } from 'rxjs';
import { RateLimit, RateLimitModule, rateLimitContext } from '../../lib/index.js';
import { CapturingLogger, uniquePrefix } from '../e2e/support/app.js';
import { redisUrl } from '../harness/redis.js';

const readme = readFileSync(new URL('../../docs/guides/microservices.md', import.meta.url), 'utf8');

/** The `rate_limit.unenforced` lines as `{ route, reason }`. */
function unenforced(logger: CapturingLogger): { route: string; reason: string }[] {
  return logger
    .matching('rate_limit.unenforced ')
    .map((line) => JSON.parse(line.slice(line.indexOf('{'))) as { route: string; reason: string })
    .map(({ route, reason }) => ({ route, reason }));
}

/** What `send()` gave: the answer, or the error its observable raised. */
async function answer(client: ClientProxy, pattern: string, data: unknown): Promise<unknown> {
  return lastValueFrom(client.send<unknown>(pattern, data)).catch((error: unknown) => ({
    error,
  }));
}

/** A transport of our own, as `CustomTransportStrategy` allows: it gives no caller address. */
class InProcessServer extends Server implements CustomTransportStrategy {
  override transportId = Symbol('in-process');
  listen(callback: () => void): void {
    callback();
  }
  close(): void {}
  on(): void {}
  unwrap<T>(): T {
    return undefined as T;
  }
  /** Calls the handler of `pattern` through Nest's pipeline, as a transport would. */
  async call(pattern: string, data: unknown): Promise<unknown> {
    const result = await this.getHandlerByPattern(pattern)!(data, new BaseRpcContext([]));
    return isObservable(result) ? lastValueFrom(result) : result;
  }
}

describe('RPC handlers on a transport without caller addresses', () => {
  @Controller()
  class JobsController {
    @MessagePattern('jobs.start')
    @RateLimit('1/m')
    start() {
      return 'started';
    }

    @MessagePattern('jobs.stop')
    @RateLimit('1/m', { key: (ctx) => `tenant:${rateLimitContext(ctx).args.tenantId}` })
    stop() {
      return 'stopped';
    }

    @MessagePattern('jobs.tcp', Transport.TCP)
    @RateLimit('1/m')
    tcpOnly() {
      return 'tcp';
    }
  }

  const logger = new CapturingLogger();
  const server = new InProcessServer();
  let app: Awaited<ReturnType<typeof NestFactory.createMicroservice>>;
  beforeAll(async () => {
    @Module({
      imports: [RateLimitModule.forRoot({ redis: redisUrl(), prefix: uniquePrefix() })],
      controllers: [JobsController],
    })
    class JobsModule {}
    app = await NestFactory.createMicroservice(JobsModule, {
      strategy: server,
      logger,
      abortOnError: false,
    });
    await app.listen();
  });
  afterAll(() => app?.close());

  it('are reported at bootstrap when keyed by address ("give it a key"), others not', () => {
    expect(unenforced(logger)).toEqual([
      {
        route: 'JobsController.start',
        reason: expect.stringMatching(
          /^its identity is the caller's address, which in-process does not give: every caller would share one budget \(ip:unknown\); give the policy a key/,
        ),
      },
    ]);
  });

  it('and would indeed share one budget: the second caller is refused', async () => {
    expect(await server.call('jobs.start', { tenantId: 'a' })).toBe('started');
    await expect(server.call('jobs.start', { tenantId: 'b' })).rejects.toMatchObject({
      status: 429,
    });
    // With a key, each tenant has its own.
    expect(await server.call('jobs.stop', { tenantId: 'a' })).toBe('stopped');
    expect(await server.call('jobs.stop', { tenantId: 'b' })).toBe('stopped');
  });
});

describe('a hybrid app (HTTP plus a TCP microservice)', () => {
  @Controller()
  class HybridController {
    @MessagePattern('hybrid')
    @RateLimit('1/m')
    hybrid() {
      return 'ok';
    }
  }

  /** Two calls to the microservice of a hybrid app connected with `inheritAppConfig`. */
  async function twoCalls(inheritAppConfig: boolean): Promise<unknown[]> {
    @Module({
      imports: [RateLimitModule.forRoot({ redis: redisUrl(), prefix: uniquePrefix() })],
      controllers: [HybridController],
    })
    class HybridModule {}
    const app = await NestFactory.create(HybridModule, { logger: false, abortOnError: false });
    const options = {
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port: 0 },
    } as const;
    const microservice = app.connectMicroservice(options, { inheritAppConfig });
    await app.startAllMicroservices();
    await app.init();
    const { port } = microservice.unwrap<NetServer>().address() as AddressInfo;
    const client = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
    try {
      await client.connect();
      return [await answer(client, 'hybrid', {}), await answer(client, 'hybrid', {})];
    } finally {
      await client.close();
      await app.close();
    }
  }

  it('is limited when connected as the docs says: app.connectMicroservice(options, { inheritAppConfig: true })', async () => {
    expect(readme).toContain('app.connectMicroservice(options, { inheritAppConfig: true })');
    expect(await twoCalls(true)).toEqual([
      'ok',
      { error: expect.objectContaining({ status: 429, retryAfter: 60 }) },
    ]);
  });

  it("is not without it: Nest gives a hybrid app's microservice none of the app's global guards", async () => {
    expect(await twoCalls(false)).toEqual(['ok', 'ok']);
  });
});
