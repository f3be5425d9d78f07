/**
 * GraphQL subscriptions over graphql-ws (issue 12, item 2): the guard runs at subscribe time,
 * the identity comes from the connection (its user, else the address of the WebSocket upgrade
 * request under `trustedProxies`), and a subscription over its limit is refused before it
 * starts, as an error the client sees.
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Int, Query, Resolver, Subscription } from '@nestjs/graphql';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { createClient } from 'graphql-ws';
import { RateLimit, rateLimitedSubscriptionsAsErrors } from '../../lib/index.js';
import { policyKey } from '../../lib/core/model/store-keys.js';
import { redisUrl } from '../harness/redis.js';
import {
  createGraphQLApp,
  subscribe,
  type GraphQLApp,
  type GraphQLServer,
  type SubscriptionResult,
} from './support/graphql.js';

@Resolver()
class TicksResolver {
  @Query(() => String)
  ping() {
    return 'pong';
  }

  @Subscription(() => Int)
  @RateLimit('2/m')
  ticks() {
    return (async function* () {
      yield { ticks: 1 };
      yield { ticks: 2 };
    })();
  }
}

const TICKS = 'subscription { ticks }';
const DELIVERED: SubscriptionResult = { next: [{ data: { ticks: 1 } }, { data: { ticks: 2 } }] };

/** A graphql-ws client whose upgrade request carries `headers` (behind a proxy). */
function clientVia(h: GraphQLApp, headers: Record<string, string>, user?: string) {
  class ProxiedWebSocket extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols, { headers });
    }
  }
  return createClient({
    url: `${h.url.replace('http', 'ws')}/graphql`,
    webSocketImpl: ProxiedWebSocket,
    connectionParams: user === undefined ? undefined : { user },
    retryAttempts: 0,
  });
}

/** The refusal in what a client received, wherever the server put it. */
function refusalIn(result: SubscriptionResult) {
  const errors = (result.error ?? result.next[0]?.errors) as
    { message: string; extensions?: Record<string, unknown> }[] | undefined;
  return errors?.[0];
}

const SETUPS: [string, GraphQLServer, Record<string, unknown>][] = [
  [
    'Apollo (Express), with rateLimitedSubscriptionsAsErrors',
    'apollo',
    {
      subscriptions: {
        'graphql-ws': rateLimitedSubscriptionsAsErrors({
          onConnect: (ctx: { connectionParams?: { user?: string }; extra: { user?: unknown } }) => {
            const id = ctx.connectionParams?.user;
            if (id !== undefined) ctx.extra.user = { id };
          },
        }),
      },
    },
  ],
  [
    'Mercurius (Fastify)',
    'mercurius',
    {
      subscription: {
        onConnect: ({ payload }: { payload?: { user?: string } }) =>
          payload?.user === undefined ? true : { user: { id: payload.user } },
      },
    },
  ],
];

describe.each(SETUPS)('subscriptions on %s', (_name, server, graphql) => {
  let h: GraphQLApp;
  let redis: Redis;
  const clients: { dispose(): void | Promise<void> }[] = [];
  beforeAll(async () => {
    h = await createGraphQLApp(server, {
      rateLimit: { trustedProxies: 1 },
      providers: [TicksResolver],
      graphql,
    });
    redis = new Redis(redisUrl());
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await h?.close();
    redis?.disconnect();
  });

  it('at 2/m: 2 subscriptions run, the third is refused at subscribe time with RATE_LIMITED', async () => {
    const ip = '198.51.100.7';
    const client = clientVia(h, { 'x-forwarded-for': ip });
    clients.push(client);
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await subscribe(client, TICKS));
    expect(results.slice(0, 2)).toEqual([DELIVERED, DELIVERED]);
    const refused = results[2]!;
    // An `error`, not data: the client's error callback, nothing delivered.
    expect(refused.next).toEqual([]);
    expect(refusalIn(refused)).toMatchObject({
      message: expect.stringMatching(/^Too many requests; retry in \d+ s$/),
      extensions: { code: 'RATE_LIMITED', retryAfter: expect.any(Number) },
    });
    expect(refusalIn(refused)!.extensions!.retryAfter).toBeGreaterThanOrEqual(1);
    // Keyed by the address of the upgrade request, as the trusted proxy forwarded it.
    expect(
      await redis.exists(policyKey(h.prefix, `ip:${ip}`, 'TicksResolver.ticks', 'default', 'tb')),
    ).toBe(1);
  });

  it("the connection's user is the identity: another user on the same address has a budget of its own", async () => {
    const ip = '198.51.100.8';
    const alice = clientVia(h, { 'x-forwarded-for': ip }, `alice-${server}`);
    const bob = clientVia(h, { 'x-forwarded-for': ip }, `bob-${server}`);
    clients.push(alice, bob);
    for (let i = 0; i < 2; i++) expect(await subscribe(alice, TICKS)).toEqual(DELIVERED);
    expect(refusalIn(await subscribe(alice, TICKS))?.extensions?.code).toBe('RATE_LIMITED');
    expect(await subscribe(bob, TICKS)).toEqual(DELIVERED);
    const key = (id: string) =>
      policyKey(h.prefix, `user:${id}`, 'TicksResolver.ticks', 'default', 'tb');
    expect(await redis.exists(key(`alice-${server}`))).toBe(1);
    expect(await redis.exists(key(`bob-${server}`))).toBe(1);
  });
});

const readme = readFileSync(new URL('../../docs/guides/graphql.md', import.meta.url), 'utf8');

describe("subscriptions on Apollo with the docs' line", () => {
  let h: GraphQLApp;
  beforeAll(async () => {
    h = await createGraphQLApp('apollo', {
      providers: [TicksResolver],
      graphql: {
        subscriptions: { 'graphql-ws': rateLimitedSubscriptionsAsErrors() },
      },
    });
  });
  afterAll(() => h?.close());

  it('a refusal reaches the client as an error; other results pass untouched', async () => {
    expect(readme).toContain(
      "subscriptions: { 'graphql-ws': rateLimitedSubscriptionsAsErrors() },",
    );
    const client = h.subscriptions();
    for (let i = 0; i < 2; i++) expect(await subscribe(client, TICKS)).toEqual(DELIVERED);
    const refused = await subscribe(client, TICKS);
    expect(refused.next).toEqual([]);
    expect(refused.error).toEqual([
      expect.objectContaining({
        extensions: expect.objectContaining({
          code: 'RATE_LIMITED',
          retryAfter: expect.any(Number),
        }),
      }),
    ]);
    // A query over graphql-ws is no subscription: answered as usual.
    expect(await subscribe(client, '{ ping }')).toEqual({ next: [{ data: { ping: 'pong' } }] });
  });
});

describe('subscriptions on Apollo without the hook', () => {
  let h: GraphQLApp;
  beforeAll(async () => {
    h = await createGraphQLApp('apollo', {
      providers: [TicksResolver],
      graphql: { subscriptions: { 'graphql-ws': true } },
    });
  });
  afterAll(() => h?.close());

  it('graphql-ws sends the refusal as a result with errors, then completes', async () => {
    const client = h.subscriptions();
    for (let i = 0; i < 2; i++) expect(await subscribe(client, TICKS)).toEqual(DELIVERED);
    const refused = await subscribe(client, TICKS);
    expect(refused.error).toBeUndefined();
    expect(refused.next).toEqual([
      {
        errors: [
          expect.objectContaining({
            path: ['ticks'],
            extensions: expect.objectContaining({ code: 'RATE_LIMITED' }),
          }),
        ],
      },
    ]);
  });
});
