/**
 * GraphQL operation cost (issue 25), on Apollo (Express) and Mercurius (Fastify), code-first
 * and schema-first, on the shared test Redis: an operation is priced from its document before
 * any resolver runs, refused over `maxCost`, charged its requested cost to a points budget once
 * and refunded down to its actual cost; `extensions.cost` and the budget's headers say so.
 *
 * The app (support/cost-app.ts): `posts(first)` returns at most 3 posts, each `author` weighs 2.
 * `posts(first: 5) { id author { id } }` requests 5 × (1 + 2) = 15 points (a Post is an object:
 * 1; `id` a scalar: 0) and costs 3 × 3 = 9.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { createClient } from 'graphql-ws';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { redisUrl } from '../harness/redis.js';
import { uniquePrefix } from '../e2e/support/app.js';
import { loadableMercurius } from './support/mercurius-interop.js';

await loadableMercurius();
const { operation, post, runs, startCostApp } = await import('./support/cost-app.js');
type CostApp = Awaited<ReturnType<typeof startCostApp>>;

const POSTS_5 = '{ posts(first: 5) { id author { id } } }';
const FIFTY_ALIASES = `{ ${Array.from(
  { length: 50 },
  (_, i) => `a${i}: posts(first: 100) { id author { id } }`,
).join(' ')} }`;

function resetRuns(): void {
  runs.posts = 0;
  runs.author = 0;
  runs.me = 0;
}

describe.each([
  ['apollo', 'code-first'],
  ['mercurius', 'code-first'],
  ['apollo', 'schema-first'],
  ['mercurius', 'schema-first'],
] as const)('operation cost on %s, %s', (server, style) => {
  let app: CostApp;
  let prefix: string;
  const redis = new Redis(redisUrl());

  beforeAll(async () => {
    prefix = uniquePrefix();
    app = await startCostApp(server, style, {
      redis: redisUrl(),
      prefix,
      timeoutMs: 2000,
      graphql: { maxCost: 1000, budget: { rate: '1000/h', key: (ctx) => userOf(ctx) } },
    });
  });
  afterAll(async () => {
    await app.close();
    redis.disconnect();
  });
  beforeEach(resetRuns);

  it('refuses the 50-alias query before any resolver runs, spending nothing', async () => {
    const reply = await operation(app.url, FIFTY_ALIASES, undefined, { 'x-user': 'alias' });
    expect(reply.status).toBe(400);
    expect(reply.body.errors).toHaveLength(1);
    expect(reply.body.errors![0]!.extensions).toMatchObject({
      code: 'MAX_COST_EXCEEDED',
      cost: 15_000,
      maxCost: 1000,
    });
    expect(runs).toEqual({ posts: 0, author: 0, me: 0 });
    const after = await operation(app.url, POSTS_5, undefined, { 'x-user': 'alias' });
    expect(after.body.extensions?.cost).toEqual({
      requestedQueryCost: 15,
      actualQueryCost: 9,
      throttleStatus: { maximumAvailable: 1000, currentlyAvailable: 991, restoreRate: 0.278 },
    });
  });

  it('charges the requested cost, refunds down to the actual cost, and says so', async () => {
    const first = await operation(app.url, POSTS_5, undefined, { 'x-user': 'refund' });
    expect(first.status).toBe(200);
    expect(first.body.errors).toBeUndefined();
    expect(first.body.extensions?.cost).toEqual({
      requestedQueryCost: 15,
      actualQueryCost: 9,
      throttleStatus: { maximumAvailable: 1000, currentlyAvailable: 991, restoreRate: 0.278 },
    });
    // The headers were sent before the refund: they show the charge.
    expect(first.headers.get('x-ratelimit-remaining')).toBe('985');
    const second = await operation(app.url, POSTS_5, undefined, { 'x-user': 'refund' });
    expect(second.body.extensions?.cost?.throttleStatus).toMatchObject({
      currentlyAvailable: 982,
    });
  });

  it('costs nothing for fields left out by @include(if: false): the minimum of 1', async () => {
    const reply = await operation(
      app.url,
      'query ($on: Boolean!) { posts(first: 50) @include(if: $on) { id } me }',
      { on: false },
      { 'x-user': 'include' },
    );
    expect(reply.body.data).toEqual({ me: 'me' });
    // `me` is a scalar (0); every operation costs at least `minimumCost` (1).
    expect(reply.body.extensions?.cost).toMatchObject({
      requestedQueryCost: 1,
      actualQueryCost: 1,
    });
    expect(runs.posts).toBe(0);
  });

  it('charges each operation of a batch, the sum in all', async () => {
    const batch = Array.from({ length: 10 }, () => ({ query: POSTS_5 }));
    const { status, json } = await post(app.url, batch, { 'x-user': 'batch' });
    expect(status).toBe(200);
    const replies = json as { extensions?: { cost?: { actualQueryCost: number } } }[];
    expect(replies).toHaveLength(10);
    expect(replies.map((r) => r.extensions?.cost?.actualQueryCost)).toEqual(Array(10).fill(9));
    const next = await operation(app.url, POSTS_5, undefined, { 'x-user': 'batch' });
    // 1000 - 10 × 9 = 910 before it, 901 after its own 9.
    expect(next.body.extensions?.cost?.throttleStatus).toMatchObject({ currentlyAvailable: 901 });
  });

  it('gives back everything when the variables do not coerce: nothing ran', async () => {
    // No variables for a required one: Apollo ends it at execution, Mercurius (which checks
    // variables before its hooks only when some are sent) likewise, without `data`.
    const bad = await operation(
      app.url,
      'query ($n: Int!) { posts(first: $n) { id author { id } } }',
      undefined,
      { 'x-user': 'coerce' },
    );
    expect(bad.body.errors?.length).toBeGreaterThan(0);
    expect(runs.posts).toBe(0);
    const next = await operation(app.url, POSTS_5, undefined, { 'x-user': 'coerce' });
    expect(next.body.extensions?.cost?.throttleStatus).toMatchObject({ currentlyAvailable: 991 });
  });

  it('refuses an operation over the budget with 429, Retry-After and no resolver run', async () => {
    const tight = await startCostApp(server, style, {
      redis: redisUrl(),
      prefix: uniquePrefix(),
      timeoutMs: 2000,
      graphql: { budget: '40/h' },
    });
    try {
      for (let i = 0; i < 2; i++) {
        const ok = await operation(tight.url, '{ posts(first: 3) { id author { id } } }');
        expect(ok.body.extensions?.cost).toMatchObject({
          requestedQueryCost: 9,
          actualQueryCost: 9,
        });
      }
      resetRuns();
      // 40 - 18 = 22 left: an operation requesting 30 is refused whole.
      const refused = await operation(tight.url, '{ posts(first: 10) { id author { id } } }');
      expect(refused.status).toBe(429);
      expect(refused.body.errors![0]!.extensions).toMatchObject({
        code: 'RATE_LIMITED',
        cost: 30,
      });
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(runs).toEqual({ posts: 0, author: 0, me: 0 });
      // 45 points: more than the budget ever holds, refused as too costly (400), not as a 429
      // without a wait.
      const never = await operation(tight.url, '{ posts(first: 15) { id author { id } } }');
      expect(never.status).toBe(400);
      expect(never.body.errors![0]!.extensions).toMatchObject({
        code: 'MAX_COST_EXCEEDED',
        cost: 45,
        maxCost: 40,
      });
    } finally {
      await tight.close();
    }
  });

  it('lets an allow-listed client run an operation above the budget’s capacity', async () => {
    // Review: the capacity cap ran before the gate, refusing allow-listed and exempt clients.
    const open = await startCostApp(server, style, {
      redis: redisUrl(),
      prefix: uniquePrefix(),
      timeoutMs: 2000,
      allowList: ['127.0.0.1', '::1'],
      graphql: { budget: '40/h' },
    });
    try {
      const reply = await operation(open.url, '{ posts(first: 15) { id author { id } } }');
      expect(reply.status).toBe(200);
      expect(reply.body.errors).toBeUndefined();
      expect(runs.posts).toBe(1);
    } finally {
      await open.close();
    }
  });
});

/** The user of a request, from the `x-user` header (no authentication in this app). */
function userOf(ctx: import('@nestjs/common').ExecutionContext): string | undefined {
  const context = ctx.getArgByIndex<{ req?: { headers?: Record<string, unknown> } }>(2);
  const user = context?.req?.headers?.['x-user'];
  return typeof user === 'string' ? `user:${user}` : undefined;
}

/**
 * Review of issue 25: Nest's subscription server runs graphql-ws without Apollo's plugins, and
 * graphql-ws takes queries and mutations too, so the 50-alias query sent over a WebSocket ran
 * 250 `posts` and 750 `author` resolvers past `maxCost` and the budget. Since issue 32 each
 * operation is priced whole before it runs and refunded after it, as over HTTP.
 */
// Mercurius answers a query or mutation over its WebSocket with "Invalid operation: query".
describe.each(['apollo'] as const)('operations over graphql-ws on %s', (server) => {
  let app: CostApp;
  beforeAll(async () => {
    app = await startCostApp(
      server,
      'code-first',
      {
        redis: redisUrl(),
        prefix: uniquePrefix(),
        timeoutMs: 2000,
        graphql: { maxCost: 1000, budget: '40/h' },
      },
      { subscriptions: { 'graphql-ws': true } },
    );
  });
  afterAll(() => app.close());
  beforeEach(resetRuns);

  async function overWebSocket(query: string) {
    const client = createClient({
      url: `${app.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      retryAttempts: 0,
    });
    try {
      return await new Promise<{
        data?: unknown;
        errors?: { extensions?: Record<string, unknown> }[];
      }>((resolve, reject) => {
        let result: { data?: unknown; errors?: never[] } = {};
        client.subscribe(
          { query },
          {
            next: (value) => void (result = value as typeof result),
            error: (error) =>
              Array.isArray(error) ? resolve({ errors: error as never[] }) : reject(error as Error),
            complete: () => resolve(result),
          },
        );
      });
    } finally {
      await client.dispose();
    }
  }

  it('refuses the 50-alias query before any resolver runs', async () => {
    const reply = await overWebSocket(FIFTY_ALIASES);
    expect(reply.errors?.length).toBeGreaterThan(0);
    expect(reply.errors![0]!.extensions).toMatchObject({ code: 'MAX_COST_EXCEEDED', cost: 15_000 });
    expect(runs).toEqual({ posts: 0, author: 0, me: 0 });
  });

  it('charges the budget and refunds down to the actual cost, as over HTTP', async () => {
    // 40 points: each operation is charged 15 and given back 6 (it costs 9), so three run
    // (40 - 3 × 9 = 13 left) and a fourth, charged 15, is refused.
    for (let i = 0; i < 3; i++) {
      const ok = await overWebSocket(POSTS_5);
      expect(ok.errors).toBeUndefined();
    }
    const refused = await overWebSocket(POSTS_5);
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', cost: 15 });
    expect(runs.posts).toBe(3);
  });
});
