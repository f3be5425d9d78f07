/**
 * The module `default` does not apply to message and event handlers (review finding): on a
 * transport without caller addresses it would put every producer in one budget and drop
 * events past it. An event consumer without @RateLimit handles everything and is reported
 * by nothing.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  BaseRpcContext,
  EventPattern,
  Server,
  type CustomTransportStrategy,
} from '@nestjs/microservices';
import { isObservable, lastValueFrom } from 'rxjs';
import { RateLimitModule } from '../../lib/index.js';
import { CapturingLogger, uniquePrefix } from '../e2e/support/app.js';
import { redisUrl } from '../harness/redis.js';

/** A transport without caller addresses (as NATS, Kafka or Redis), in this process. */
class InProcessServer extends Server implements CustomTransportStrategy {
  override transportId = Symbol('in-process');
  listen(callback: () => void) {
    callback();
  }
  close() {}
  on() {}
  unwrap<T>(): T {
    return undefined as T;
  }
  async emit(pattern: string, data: unknown): Promise<unknown> {
    const result = await this.getHandlerByPattern(pattern)!(data, new BaseRpcContext([]));
    return isObservable(result) ? lastValueFrom(result, { defaultValue: undefined }) : result;
  }
}

const handled: unknown[] = [];

@Controller()
class OrdersConsumer {
  @EventPattern('order.created')
  created(data: { order: number }) {
    handled.push(data.order);
  }
}

describe('a module default and an event consumer without @RateLimit', () => {
  const logger = new CapturingLogger();
  const server = new InProcessServer();
  let app: Awaited<ReturnType<typeof NestFactory.createMicroservice>>;
  beforeAll(async () => {
    @Module({
      imports: [
        RateLimitModule.forRoot({ redis: redisUrl(), prefix: uniquePrefix(), default: '3/m' }),
      ],
      controllers: [OrdersConsumer],
    })
    class ConsumerModule {}
    app = await NestFactory.createMicroservice(ConsumerModule, {
      strategy: server,
      logger,
      abortOnError: false,
    });
    await app.listen();
  });
  afterAll(() => app?.close());

  it('handles every event of every producer, and logs no refusal or unenforced policy', async () => {
    for (let i = 0; i < 6; i++) await server.emit('order.created', { order: i });
    expect(handled).toEqual([0, 1, 2, 3, 4, 5]);
    expect(logger.matching('rate_limit.')).toEqual([]);
  });
});
