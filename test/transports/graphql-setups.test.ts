/**
 * GraphQL setups beyond the code-first acceptance (issue 12, item 2): schema-first resolvers,
 * a context without the HTTP request (still limited, reported once), a fail-closed policy
 * with Redis down, contexts of any shape, and `rateLimitContext` on a GraphQL call.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ExecutionContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import {
  RATE_LIMIT_REDIS,
  RateLimit,
  RateLimitGuard,
  rateLimitContext,
  SkipRateLimit,
} from '../../lib/index.js';
import { refusalOf } from '../../lib/nest/transports/refusal.js';
import { graphqlTransport } from '../../lib/nest/transports/graphql.js';
import { startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import { CapturingLogger, parseRateLimit, pollUntil } from '../e2e/support/app.js';
import { createGraphQLApp, SERVERS, type GraphQLApp } from './support/graphql.js';

const TYPE_DEFS = `
  type Query { catalog: String! open: String! health: String! }
  type Mutation { save(title: String!): String! }
`;

@Resolver('Query')
class SchemaFirstQueries {
  @Query()
  @RateLimit('3/m')
  catalog() {
    return 'catalog';
  }

  @Query()
  open() {
    return 'open';
  }

  @Query()
  @SkipRateLimit()
  health() {
    return 'up';
  }
}

@Resolver('Mutation')
class SchemaFirstMutations {
  @Mutation()
  @RateLimit('2/m', {
    name: 'writes',
    cost: (ctx) => (rateLimitContext(ctx).args?.title === 'big' ? 2 : 1),
  })
  save(@Args('title') title: string) {
    return `saved ${title}`;
  }
}

describe.each(SERVERS)('schema-first on %s', (server) => {
  let h: GraphQLApp;
  beforeAll(async () => {
    h = await createGraphQLApp(server, {
      rateLimit: { default: '10/m' },
      providers: [SchemaFirstQueries, SchemaFirstMutations],
      graphql: { autoSchemaFile: false, typeDefs: TYPE_DEFS },
    });
  });
  afterAll(() => h?.close());

  it('at 3/m: 3 answers with data, then RATE_LIMITED with the wait and the headers', async () => {
    const replies = [];
    for (let i = 0; i < 4; i++) replies.push(await h.query('{ catalog }'));
    expect(replies.slice(0, 3).map((r) => r.data)).toEqual(Array(3).fill({ catalog: 'catalog' }));
    const refused = replies[3]!;
    expect(refused.status).toBe(200);
    expect(refused.errors).toEqual([
      expect.objectContaining({
        path: ['catalog'],
        extensions: expect.objectContaining({
          code: 'RATE_LIMITED',
          retryAfter: expect.any(Number),
        }),
      }),
    ]);
    const retryAfter = refused.errors![0]!.extensions!.retryAfter as number;
    expect(refused.headers.get('retry-after')).toBe(String(retryAfter));
    expect(parseRateLimit(refused.headers.get('ratelimit'))).toEqual({
      default: { r: 0, t: retryAfter },
    });
  });

  it('the default, @SkipRateLimit and a cost over the arguments apply as code-first', async () => {
    const open = await h.query('{ open health }');
    expect(open.data).toEqual({ open: 'open', health: 'up' });
    expect(parseRateLimit(open.headers.get('ratelimit')).default?.r).toBe(9);
    const big = await h.query('mutation { save(title: "big") }');
    expect(big.data).toEqual({ save: 'saved big' });
    expect(parseRateLimit(big.headers.get('ratelimit')).writes?.r).toBe(0);
    expect((await h.query('mutation { save(title: "small") }')).errors?.[0]?.extensions?.code).toBe(
      'RATE_LIMITED',
    );
  });
});

describe.each(SERVERS)('an app context whose req is no request, on %s', (server) => {
  const logger = new CapturingLogger();
  let h: GraphQLApp;
  beforeAll(async () => {
    h = await createGraphQLApp(server, {
      rateLimit: { trustedProxies: 1 },
      providers: [SchemaFirstQueries],
      // An app's own `req` that is no request: Nest's drivers keep it.
      graphql: { autoSchemaFile: false, typeDefs: TYPE_DEFS, context: () => ({ req: {} }) },
      logger,
    });
  });
  afterAll(() => h?.close());

  /** `{ catalog }` from 5 addresses: what each got. */
  async function fromFiveAddresses() {
    const codes = [];
    for (let i = 0; i < 5; i++) {
      const reply = await h.query('{ catalog }', { 'x-forwarded-for': `192.0.2.${i}` });
      codes.push(reply.errors?.[0]?.extensions?.code ?? 'ok');
    }
    return codes;
  }

  if (server === 'apollo') {
    it('is still limited, as ip:unknown, and reported once with the option to set', async () => {
      expect(await fromFiveAddresses()).toEqual(['ok', 'ok', 'ok', 'RATE_LIMITED', 'RATE_LIMITED']);
      const lines = logger.matching('rate_limit.config_error');
      expect(lines).toEqual([expect.stringContaining('the GraphQL context holds no HTTP request')]);
      expect(lines[0]).toContain('ip:unknown');
      expect(lines[0]).toContain("GraphQLModule's `context` option");
    });
  } else {
    it("finds the request behind Mercurius's reply: each address has its own budget", async () => {
      expect(await fromFiveAddresses()).toEqual(Array(5).fill('ok'));
      expect(logger.matching('rate_limit.config_error')).toEqual([]);
    });
  }
});

describe.each(SERVERS)('Redis down under a fail-closed policy, on %s', (server) => {
  let redis: RedisServerHandle;
  let h: GraphQLApp;
  @Resolver('Query')
  class Guarded {
    @Query()
    @RateLimit('3/m', { failClosed: true })
    catalog() {
      return 'catalog';
    }
  }
  beforeAll(async () => {
    redis = await startRedisServer();
    h = await createGraphQLApp(server, {
      rateLimit: { redis: redis.url, timeoutMs: 200 },
      providers: [Guarded],
      graphql: { autoSchemaFile: false, typeDefs: 'type Query { catalog: String! }' },
    });
  });
  afterAll(async () => {
    // Back up before the app closes, so the module's client ends cleanly (a client closed
    // while it cannot connect leaves a reconnection timer behind).
    await redis?.restart();
    const client = h?.app.get<Redis>(RATE_LIMIT_REDIS);
    await pollUntil(async () => client?.status === 'ready', 5000);
    await h?.close();
    await redis?.kill();
  });

  it('refuses with SERVICE_UNAVAILABLE, retryAfter 1 and Retry-After: 1', async () => {
    expect((await h.query('{ catalog }')).data).toEqual({ catalog: 'catalog' });
    await redis.kill();
    const refused = await h.query('{ catalog }');
    expect(refused.status).toBe(200);
    expect(refused.errors).toEqual([
      expect.objectContaining({
        message: 'Rate limiting is unavailable; retry shortly',
        extensions: expect.objectContaining({ code: 'SERVICE_UNAVAILABLE', retryAfter: 1 }),
      }),
    ]);
    expect(refused.headers.get('retry-after')).toBe('1');
  });
});

/** A GraphQL ExecutionContext holding `args` (`[root, args, context, info]`). */
function gqlContext(args: unknown[]): ExecutionContext {
  return {
    getType: () => 'graphql',
    getClass: () => SchemaFirstQueries,
    getHandler: () => SchemaFirstQueries.prototype.catalog,
    getArgs: () => args,
    getArgByIndex: (i: number) => args[i],
  } as unknown as ExecutionContext;
}

describe('GraphQL contexts of any shape', () => {
  let h: GraphQLApp;
  beforeAll(async () => {
    h = await createGraphQLApp('apollo', {
      providers: [SchemaFirstQueries],
      graphql: { autoSchemaFile: false, typeDefs: TYPE_DEFS },
    });
  });
  afterAll(() => h?.close());

  it('get an answer or a GraphQL refusal, never a TypeError', async () => {
    const guard = h.app.get(RateLimitGuard);
    const shapes = [
      [],
      [undefined],
      [null, null, null, null],
      ['text', 42, 'ctx', 7],
      [{}, {}, {}, {}],
    ];
    const answers = [];
    for (const args of shapes) {
      answers.push(
        await guard.canActivate(gqlContext(args)).then(
          (admitted) => admitted,
          (error: Error & { extensions?: { code?: string } }) =>
            error.extensions?.code ?? error.name,
        ),
      );
    }
    // One budget (ip:unknown) for all: 3 admitted, then refused.
    expect(answers).toEqual([true, true, true, 'RATE_LIMITED', 'RATE_LIMITED']);
  });
});

describe('rateLimitContext on a GraphQL call', () => {
  it('the HTTP request, its user and the field arguments', () => {
    const req = { headers: {}, ip: '203.0.113.5', user: { id: 'ann' } };
    expect(rateLimitContext(gqlContext([{}, { first: 100 }, { req }, {}]))).toEqual({
      transport: 'graphql',
      request: req,
      user: { id: 'ann' },
      args: { first: 100 },
    });
  });

  it('Mercurius: the request behind the reply; the context user when the request has none', () => {
    const request = { headers: {}, ip: '203.0.113.6' };
    const ctx = gqlContext([{}, {}, { reply: { request, header() {} }, user: { id: 'bo' } }, {}]);
    expect(rateLimitContext(ctx)).toMatchObject({ request, user: { id: 'bo' } });
  });

  it('a graphql-ws subscription under Apollo: the upgrade request and the connection user', () => {
    const upgrade = { headers: { 'x-forwarded-for': '198.51.100.1' }, socket: {} };
    const connection = { connectionParams: {}, extra: { request: upgrade, user: { id: 'cy' } } };
    expect(rateLimitContext(gqlContext([{}, {}, { req: connection }, {}]))).toMatchObject({
      request: upgrade,
      user: { id: 'cy' },
    });
  });

  it('headers go to the Fastify reply a context holds (Apollo on Fastify with reply in the context)', () => {
    const sent: Record<string, string> = {};
    const reply = { header: (n: string, v: string) => void (sent[n] = v), sent: false };
    graphqlTransport.setHeaders(gqlContext([{}, {}, { req: { headers: {} }, reply }, {}]), {
      'Retry-After': '3',
    });
    expect(sent).toEqual({ 'Retry-After': '3' });
    const refusal = refusalOf({
      status: 429,
      retryAfter: 3,
      message: 'm',
      exposeDetails: true,
      policies: ['default'],
      format: 'nest',
    });
    expect(() => graphqlTransport.refuse(gqlContext([{}, {}, {}, {}]), refusal, {})).toThrow(
      expect.objectContaining({
        message: 'm',
        extensions: { code: 'RATE_LIMITED', retryAfter: 3 },
      }),
    );
  });
});
