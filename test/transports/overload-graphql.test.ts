/**
 * Overload protection (the `overload` option) on GraphQL, Apollo (Express) and Mercurius
 * (Fastify): a shed operation field is a GraphQL error with `SERVICE_UNAVAILABLE` and
 * `retryAfter`, with `Retry-After` on the HTTP response, and spends no rate-limit budget; a
 * critical field is admitted; a held field's slot is given back when its resolver settles.
 * The limit is fixed at 2 calls in flight and saturated by resolvers the test holds.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Field, ObjectType, Query, ResolveField, Resolver } from '@nestjs/graphql';
import type { Redis } from 'ioredis';
import { Priority, RateLimit } from '../../lib/index.js';
import { RoutePlanner } from '../../lib/nest/plan/planner.js';
import { disconnect, newRedis } from '../harness/redis.js';
import { pollUntil } from '../e2e/support/app.js';
import { createGraphQLApp, SERVERS, type GraphQLApp } from './support/graphql.js';

let waiting: (() => void)[] = [];

@Resolver()
@Priority('sheddable')
class LoadResolver {
  @Query(() => String)
  async hold() {
    await new Promise<void>((resolve) => waiting.push(resolve));
    return 'held';
  }

  @Query(() => String)
  @RateLimit('3/m', { key: () => 'one-client' })
  limited() {
    return 'ok';
  }

  @Query(() => String)
  @Priority('critical')
  critical() {
    return 'ok';
  }
}

@ObjectType()
class Post {
  @Field(() => String)
  id!: string;
}

@Resolver(() => Post)
@Priority('sheddable')
class PostResolver {
  @Query(() => [Post])
  posts() {
    return [{ id: '1' }, { id: '2' }, { id: '3' }];
  }

  @ResolveField(() => String)
  author() {
    return 'ada';
  }
}

const FIXED = { initialLimit: 2, minLimit: 2, maxLimit: 2, maxEventLoopDelayMs: false } as const;

let redis: Redis;
beforeAll(() => {
  redis = newRedis();
});
afterAll(() => disconnect(redis));

describe.each(SERVERS)('overload protection on %s', (server) => {
  let h: GraphQLApp;
  beforeAll(async () => {
    h = await createGraphQLApp(server, {
      rateLimit: { overload: FIXED },
      providers: [LoadResolver],
    });
  });
  afterAll(() => h?.close());

  const inFlight = () =>
    h.app.get(RoutePlanner, { strict: false }).overload!.protection.pool()!.inFlightTotal;

  it('sheds a field at the limit as SERVICE_UNAVAILABLE with retryAfter, spending no budget; admits a critical one', async () => {
    waiting = [];
    const holds = [h.query('{ hold }'), h.query('{ hold }')];
    expect(await pollUntil(async () => waiting.length === 2, 10_000)).toBe(true);

    const shed = await h.query('{ limited }');
    expect(shed.status).toBe(200);
    expect(shed.data ?? null).toBeNull();
    expect(shed.errors).toEqual([
      expect.objectContaining({
        message: 'The server is overloaded; retry shortly',
        path: ['limited'],
        extensions: expect.objectContaining({ code: 'SERVICE_UNAVAILABLE', retryAfter: 1 }),
      }),
    ]);
    expect(shed.headers.get('retry-after')).toBe('1');
    // Decided before the rate limits: the field's budget has no key.
    expect(await redis.keys(`${h.prefix}:*one-client*`)).toEqual([]);
    expect((await h.query('{ critical }')).data).toEqual({ critical: 'ok' });

    for (const resolve of waiting) resolve();
    for (const reply of await Promise.all(holds)) expect(reply.data).toEqual({ hold: 'held' });
    // Given back as each resolver settled, before its answer was sent.
    expect(inFlight()).toBe(0);

    const admitted = await h.query('{ limited }');
    expect(admitted.data).toEqual({ limited: 'ok' });
    expect(admitted.headers.get('x-ratelimit-remaining')).toBe('2');
    expect(await redis.keys(`${h.prefix}:*one-client*`)).toHaveLength(1);
  });

  describe('with fieldResolverEnhancers: guards', () => {
    let fields: GraphQLApp;
    beforeAll(async () => {
      fields = await createGraphQLApp(server, {
        rateLimit: { overload: FIXED },
        providers: [PostResolver],
        graphql: { fieldResolverEnhancers: ['guards'] },
      });
    });
    afterAll(() => fields?.close());

    it('takes one slot per operation, at its root field: nested fields (no interceptor gives theirs back) hold none', async () => {
      const pool = () =>
        fields.app.get(RoutePlanner, { strict: false }).overload!.protection.pool()!;
      // Three posts, each with an author field the guard runs on: before, every author
      // field took a slot never given back, and the limit of 2 shed every later query.
      for (let i = 0; i < 5; i++) {
        const reply = await fields.query('{ posts { id author } }');
        expect(reply.errors).toBeUndefined();
        expect(reply.data).toEqual({
          posts: [
            { id: '1', author: 'ada' },
            { id: '2', author: 'ada' },
            { id: '3', author: 'ada' },
          ],
        });
      }
      expect(pool().inFlightTotal).toBe(0);
    });
  });
});
