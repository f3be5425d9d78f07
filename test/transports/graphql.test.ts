/**
 * GraphQL on Apollo (Express) and Mercurius (Fastify), code-first (issue 12, item 2): each
 * decorated operation field counts once per operation, a refusal is a GraphQL error with
 * `RATE_LIMITED` and the wait, with `Retry-After` and `RateLimit` on the HTTP response; the
 * module `default` and `@SkipRateLimit` apply to resolvers; cost functions read the field's
 * arguments.
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Args,
  Field,
  Int,
  Mutation,
  ObjectType,
  Parent,
  Query,
  ResolveField,
  Resolver,
} from '@nestjs/graphql';
import { Redis } from 'ioredis';
import { RateLimit, rateLimitContext, SkipRateLimit } from '../../lib/index.js';
import { policyKey } from '../../lib/core/model/store-keys.js';
import { redisUrl } from '../harness/redis.js';
import { parseRateLimit } from '../e2e/support/app.js';
import {
  createGraphQLApp,
  SERVERS,
  type GraphQLApp,
  type GraphQLReply,
} from './support/graphql.js';

@ObjectType()
class Post {
  @Field(() => Int)
  id!: number;
}

/** How often each resolver ran, to tell a refused field from an admitted one. */
const runs = { author: 0 };

@Resolver()
class CatalogResolver {
  @Query(() => String)
  @RateLimit('3/m')
  catalog() {
    return 'catalog';
  }

  @Mutation(() => String)
  @RateLimit('2/m', { name: 'writes' })
  save() {
    return 'saved';
  }

  @Query(() => [Int])
  @RateLimit('100/m', {
    cost: (ctx) => Math.max(1, Math.ceil((rateLimitContext(ctx).args?.first ?? 10) / 10)),
  })
  items(@Args('first', { type: () => Int, nullable: true }) first?: number) {
    return Array.from({ length: Math.min(first ?? 10, 3) }, (_, i) => i);
  }

  /** Only the module default. */
  @Query(() => String)
  plain() {
    return 'plain';
  }

  @Query(() => String)
  @SkipRateLimit()
  health() {
    return 'up';
  }

  @Query(() => String)
  @RateLimit('5/m', { key: (ctx) => `who:${rateLimitContext(ctx).user?.id ?? 'nobody'}` })
  whoami() {
    return 'me';
  }
}

@Resolver()
@SkipRateLimit()
class InternalResolver {
  @Query(() => String)
  internal() {
    return 'internal';
  }
}

@Resolver(() => Post)
class PostResolver {
  @Query(() => [Post])
  @SkipRateLimit()
  posts() {
    return [1, 2, 3, 4, 5].map((id) => ({ id }));
  }

  // Nullable, so one item's error nulls that item alone and every item reports its own.
  @ResolveField(() => String, { nullable: true })
  @RateLimit('2/m')
  author(@Parent() post: Post) {
    runs.author++;
    return `author of ${post.id}`;
  }
}

const DEFAULT = '50/m';

/** The Redis key of a token-bucket policy (the default algorithm). */
const keyOf = (prefix: string, identity: string, scope: string, policy = 'default') =>
  policyKey(prefix, identity, scope, policy, 'tb');

/** The `extensions` of a refusal, as both servers must put it on the wire. */
function refusal(reply: GraphQLReply) {
  expect(reply.errors).toHaveLength(1);
  const [error] = reply.errors!;
  return { message: error!.message, path: error!.path, extensions: error!.extensions };
}

describe.each(SERVERS)('GraphQL on %s', (server) => {
  let h: GraphQLApp;
  let redis: Redis;
  let n = 0;
  /** A client address of its own (X-Forwarded-For behind one trusted proxy): a fresh budget. */
  const client = () => ({ 'x-forwarded-for': `203.0.113.${++n}` });

  beforeAll(async () => {
    h = await createGraphQLApp(server, {
      rateLimit: { default: DEFAULT, trustedProxies: 1 },
      providers: [CatalogResolver, InternalResolver, PostResolver],
      graphql: { fieldResolverEnhancers: ['guards'] },
      userFromHeader: true,
    });
    redis = new Redis(redisUrl());
  });
  afterAll(async () => {
    await h?.close();
    redis?.disconnect();
  });

  it('at 3/m: 3 answers with data, then RATE_LIMITED with the wait and the headers', async () => {
    const headers = client();
    const replies: GraphQLReply[] = [];
    for (let i = 0; i < 5; i++) replies.push(await h.query('{ catalog }', headers));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(replies.slice(0, 3).map((r) => r.data)).toEqual(Array(3).fill({ catalog: 'catalog' }));
    expect(
      replies.slice(0, 3).map((r) => parseRateLimit(r.headers.get('ratelimit')).default?.r),
    ).toEqual([2, 1, 0]);
    for (const refused of replies.slice(3)) {
      expect(refused.data).toBeNull();
      const { message, path, extensions } = refusal(refused);
      expect(path).toEqual(['catalog']);
      expect(message).toMatch(/^Too many requests; retry in \d+ s$/);
      expect(extensions).toMatchObject({ code: 'RATE_LIMITED', retryAfter: expect.any(Number) });
      const retryAfter = extensions!.retryAfter as number;
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(20);
      expect(refused.headers.get('retry-after')).toBe(String(retryAfter));
      expect(parseRateLimit(refused.headers.get('ratelimit'))).toEqual({
        default: { r: 0, t: retryAfter },
      });
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
    }
    const ip = headers['x-forwarded-for'];
    expect(await redis.exists(keyOf(h.prefix, `ip:${ip}`, 'CatalogResolver.catalog'))).toBe(1);
  });

  it('a mutation at 2/m named writes: 2 answers, then RATE_LIMITED; the default counts too', async () => {
    const headers = client();
    const replies: GraphQLReply[] = [];
    for (let i = 0; i < 3; i++) replies.push(await h.query('mutation { save }', headers));
    expect(replies.slice(0, 2).map((r) => r.data)).toEqual([{ save: 'saved' }, { save: 'saved' }]);
    expect(parseRateLimit(replies[1]!.headers.get('ratelimit'))).toMatchObject({
      writes: { r: 0 },
      default: { r: 48 },
    });
    expect(refusal(replies[2]!).extensions).toMatchObject({ code: 'RATE_LIMITED' });
    const ip = headers['x-forwarded-for'];
    expect(await redis.exists(keyOf(h.prefix, `ip:${ip}`, 'CatalogResolver.save', 'writes'))).toBe(
      1,
    );
    expect(await redis.exists(keyOf(h.prefix, `ip:${ip}`, 'global'))).toBe(1);
  });

  it('the module default limits an undecorated field, in the global scope', async () => {
    const headers = client();
    const reply = await h.query('{ plain }', headers);
    expect(reply.data).toEqual({ plain: 'plain' });
    expect(parseRateLimit(reply.headers.get('ratelimit'))).toEqual({ default: { r: 49, t: 2 } });
    const again = await h.query('{ plain }', headers);
    expect(parseRateLimit(again.headers.get('ratelimit')).default?.r).toBe(48);
    // Each root field spends the default once.
    const twice = await h.query('{ plain again: plain }', headers);
    expect(twice.data).toEqual({ plain: 'plain', again: 'plain' });
    expect(parseRateLimit(twice.headers.get('ratelimit')).default?.r).toBe(46);
    const ip = headers['x-forwarded-for'];
    expect(await redis.exists(keyOf(h.prefix, `ip:${ip}`, 'global'))).toBe(1);
  });

  it('@SkipRateLimit on a handler and on a resolver class exempts, the default included', async () => {
    const headers = client();
    for (let i = 0; i < 3; i++) {
      const reply = await h.query('{ health internal }', headers);
      expect(reply.data).toEqual({ health: 'up', internal: 'internal' });
      expect(reply.headers.get('ratelimit')).toBeNull();
    }
    const ip = headers['x-forwarded-for'];
    expect(await redis.keys(`${h.prefix}:{ip:${ip}}:*`)).toEqual([]);
  });

  it('a cost function reading `first` spends what it says: first: 100 spends 10', async () => {
    const headers = client();
    const big = await h.query('{ items(first: 100) }', headers);
    expect(big.data).toEqual({ items: [0, 1, 2] });
    expect(parseRateLimit(big.headers.get('ratelimit')).default?.r).toBe(90);
    const small = await h.query('{ items(first: 5) }', headers);
    expect(parseRateLimit(small.headers.get('ratelimit')).default?.r).toBe(89);
    const unset = await h.query('{ items }', headers);
    expect(parseRateLimit(unset.headers.get('ratelimit')).default?.r).toBe(88);
  });

  it('a field resolver under a list of 5 counts once per operation, not once per item', async () => {
    const headers = client();
    runs.author = 0;
    const first = await h.query('{ posts { id author } }', headers);
    expect(first.errors).toBeUndefined();
    expect(first.data).toEqual({
      posts: [1, 2, 3, 4, 5].map((id) => ({ id, author: `author of ${id}` })),
    });
    expect(runs.author).toBe(5);
    expect(parseRateLimit(first.headers.get('ratelimit'))).toMatchObject({ default: { r: 1 } });
    await h.query('{ posts { author } }', headers);
    // The third operation is over 2/m: every item's field is refused, none resolved.
    runs.author = 0;
    const third = await h.query('{ posts { author } }', headers);
    expect(runs.author).toBe(0);
    expect(third.data).toEqual({ posts: Array(5).fill({ author: null }) });
    // Mercurius writes list indices as strings.
    expect(third.errors!.map((e) => [e.path!.map(String), e.extensions?.code])).toEqual(
      ['0', '1', '2', '3', '4'].map((i) => [['posts', i, 'author'], 'RATE_LIMITED']),
    );
  });

  it('two fields of one operation count once each; an alias is a field of its own', async () => {
    const headers = client();
    const reply = await h.query('{ a: catalog b: catalog }', headers);
    expect(reply.data).toEqual({ a: 'catalog', b: 'catalog' });
    const next = await h.query('{ catalog }', headers);
    expect(next.data).toEqual({ catalog: 'catalog' });
    expect(parseRateLimit(next.headers.get('ratelimit')).default?.r).toBe(0);
  });

  it('the user comes from the HTTP request behind the operation', async () => {
    const reply = await h.query('{ whoami }', { ...client(), 'x-user': `u${server}` });
    expect(reply.data).toEqual({ whoami: 'me' });
    expect(await redis.exists(keyOf(h.prefix, `who:u${server}`, 'CatalogResolver.whoami'))).toBe(1);
  });
});

describe('the GraphQL guide', () => {
  it('documents the cost recipe the resolver above uses', () => {
    const readme = readFileSync(new URL('../../docs/guides/graphql.md', import.meta.url), 'utf8');
    expect(readme).toContain(
      'cost: (ctx) => Math.max(1, Math.ceil((rateLimitContext(ctx).args?.first ?? 10) / 10)),',
    );
  });
});

describe('Apollo and Mercurius say the same', () => {
  const apps: GraphQLApp[] = [];
  afterAll(() => Promise.all(apps.map((a) => a.close())));

  it('a refusal has the same status, message, path and extensions on both', async () => {
    const wire = [];
    for (const server of SERVERS) {
      const h = await createGraphQLApp(server, { providers: [CatalogResolver] });
      apps.push(h);
      for (let i = 0; i < 3; i++) await h.query('{ catalog }');
      const refused = await h.query('{ catalog }');
      const [error] = refused.errors!;
      wire.push({
        status: refused.status,
        data: refused.data,
        message: error!.message,
        path: error!.path,
        extensions: { code: error!.extensions!.code, retryAfter: error!.extensions!.retryAfter },
        retryAfter: refused.headers.get('retry-after'),
      });
    }
    expect(wire[0]).toMatchObject({
      status: 200,
      data: null,
      extensions: { code: 'RATE_LIMITED' },
    });
    expect(wire[1]).toEqual(wire[0]);
  });
});
