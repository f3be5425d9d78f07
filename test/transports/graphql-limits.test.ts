/**
 * Operation limits of the module's `graphql` option (issue 32), on Apollo (Express) and
 * Mercurius (Fastify), over HTTP and over the server's WebSocket: an operation over `maxDepth`,
 * `maxHeight`, `maxAliases` or `maxRootFields` is refused with 400, its limit's name, the
 * measured value and the maximum, before the cost walk and any resolver, spending nothing; a
 * client's mistake (an unknown operation name, nesting deep enough to overflow a recursive
 * walk) is a 400, never a 500.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { redisUrl } from '../harness/redis.js';
import { uniquePrefix } from '../e2e/support/app.js';
import { loadableMercurius } from './support/mercurius-interop.js';

await loadableMercurius();
const { NO_RUNS, operation, overWebSocket, resetRuns, runs, startLimitsApp, wsError } =
  await import('./support/limits-app.js');
type LimitsApp = Awaited<ReturnType<typeof startLimitsApp>>;

/** `node { next { next … { id } } }`, `levels` fields deep. */
function nested(levels: number): string {
  return `{ node { ${'next { '.repeat(levels - 2)}id${' }'.repeat(levels - 2)} } }`;
}

/** `count` aliases of `field`, at the root. */
function aliased(count: number, field: string, operation = ''): string {
  return `${operation}{ ${Array.from({ length: count }, (_, i) => `a${i}: ${field}`).join(' ')} }`;
}

/** The points the budget of `app`'s anonymous client holds after a `{ hello }` (1 point). */
async function available(app: LimitsApp): Promise<number> {
  const reply = await operation(app.url, '{ hello }');
  runs.hello--;
  return (reply.body.extensions?.cost?.throttleStatus as { currentlyAvailable: number })
    .currentlyAvailable;
}

describe.each(['apollo', 'mercurius'] as const)('operation limits on %s', (server) => {
  let app: LimitsApp;
  let tight: LimitsApp;
  /** The same app without the `graphql` option: the server's own answers. */
  let plain: LimitsApp;

  beforeAll(async () => {
    const base = { redis: redisUrl(), timeoutMs: 2000 };
    [app, tight, plain] = await Promise.all([
      startLimitsApp(server, { ...base, prefix: uniquePrefix(), graphql: { budget: '1000/h' } }),
      startLimitsApp(server, {
        ...base,
        prefix: uniquePrefix(),
        graphql: {
          budget: '1000/h',
          maxDepth: 3,
          maxHeight: 8,
          maxAliases: 2,
          maxRootFields: 3,
          maxTokens: 300,
        },
      }),
      startLimitsApp(server, { ...base, prefix: uniquePrefix() }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([app.close(), tight.close(), plain.close()]);
  });
  beforeEach(resetRuns);

  // `measured` is where the check stopped (at least the first value over the limit).
  it.each([
    ['maxDepth', nested(4), 4, 3],
    // Distinct fields per selection set: node, hello, conn; id, next; id; total, items; id, name.
    ['maxHeight', '{ node { id next { id } } hello conn { total items { id name } } }', 10, 8],
    ['maxAliases', '{ a: hello b: hello c: hello }', 3, 2],
    // Distinct root fields: an alias of one already selected is not counted again.
    ['maxRootFields', '{ hello node { id } h: hello conn { total } version }', 4, 3],
  ])(
    'refuses an operation over %s: 400, its name, measured, maximum',
    async (limit, query, measured, maximum) => {
      const before = await available(tight);
      const reply = await operation(tight.url, query);
      expect(reply.status).toBe(400);
      // Apollo answers a refusal before execution without `data`; Mercurius with `data: null`.
      if (server === 'apollo') expect('data' in reply.body).toBe(false);
      else expect(reply.body.data).toBeNull();
      expect(reply.body.errors).toHaveLength(1);
      expect(reply.body.errors![0]!.extensions).toMatchObject({
        code: 'OPERATION_LIMIT_EXCEEDED',
        limit,
        measured,
        maximum,
      });
      expect(runs).toEqual(NO_RUNS);
      // Nothing spent: the next operation sees the budget less only its own 1 point.
      expect(await available(tight)).toBe(before - 1);
    },
  );

  it('refuses 1,000 aliases of a root scalar by the default maxAliases, running none', async () => {
    const reply = await operation(app.url, aliased(1000, 'hello'));
    expect(reply.status).toBe(400);
    expect(reply.body.errors![0]!.extensions).toMatchObject({
      code: 'OPERATION_LIMIT_EXCEEDED',
      limit: 'maxAliases',
      measured: 201,
      maximum: 200,
    });
    expect(runs.hello).toBe(0);
  });

  it('refuses 1,000 aliased sendEmail mutations by the default maxAliases, sending none', async () => {
    const reply = await operation(app.url, aliased(1000, 'sendEmail', 'mutation '));
    expect(reply.status).toBe(400);
    expect(reply.body.errors![0]!.extensions).toMatchObject({
      code: 'OPERATION_LIMIT_EXCEEDED',
      limit: 'maxAliases',
    });
    expect(runs.sendEmail).toBe(0);
  });

  it('answers 2,000 levels of nesting with 400 from maxDepth, not a stack overflow', async () => {
    const reply = await operation(app.url, nested(2000));
    expect(reply.status).toBe(400);
    expect(reply.body.errors).toHaveLength(1);
    expect(reply.body.errors![0]!.extensions).toMatchObject({
      code: 'OPERATION_LIMIT_EXCEEDED',
      limit: 'maxDepth',
      measured: 65,
      maximum: 64,
    });
    expect(runs).toEqual(NO_RUNS);
  });

  it('leaves an unknown operationName to the server’s own answer, running nothing', async () => {
    const query = 'query A { hello } query B { node { id } }';
    const reply = await operation(app.url, query, 'C');
    const own = await operation(plain.url, query, 'C');
    // Apollo: 400; Mercurius: 200 with the error, as graphql-js's execute answers it.
    expect(reply.status).toBe(server === 'apollo' ? 400 : 200);
    expect(reply.status).toBe(own.status);
    expect(reply.body.errors?.map((e) => e.message)).toEqual(
      own.body.errors?.map((e) => e.message),
    );
    expect(reply.body.errors![0]!.message).toMatch(/Unknown operation named "C"/);
    expect(runs).toEqual(NO_RUNS);
  });

  it('prices a query over the WebSocket whole: 500 aliased __schema refused, 0 bytes of schema', async () => {
    const flood = aliased(500, '__schema { types { name fields { name } } }');
    const reply = await overWebSocket(app.url, flood);
    expect(wsError(reply)?.extensions).toMatchObject({
      code: 'OPERATION_LIMIT_EXCEEDED',
      limit: 'maxAliases',
      measured: 201,
      maximum: 200,
    });
    expect(reply.next.every((r) => r.data === undefined || r.data === null)).toBe(true);
    expect(JSON.stringify(reply)).not.toContain('__Schema');
  });

  it('refuses a hello beside introspection over the WebSocket, running nothing of it', async () => {
    // Over maxRootFields (3): introspection runs without a resolver of Nest's, so it ran
    // before the guard that priced at the first Nest resolver refused `hello`.
    const reply = await overWebSocket(
      tight.url,
      '{ __schema { queryType { name } } __type(name: "Node") { name } hello version }',
    );
    expect(wsError(reply)?.extensions).toMatchObject({
      code: 'OPERATION_LIMIT_EXCEEDED',
      limit: 'maxRootFields',
      measured: 4,
      maximum: 3,
    });
    expect(JSON.stringify(reply)).not.toContain('"Query"');
    expect(runs).toEqual(NO_RUNS);
  });

  it('refuses a mutation over the WebSocket over a limit, sending no email', async () => {
    const reply = await overWebSocket(tight.url, aliased(20, 'sendEmail', 'mutation '));
    expect(wsError(reply)?.extensions).toMatchObject({
      code: 'OPERATION_LIMIT_EXCEEDED',
      limit: 'maxAliases',
      measured: 3,
      maximum: 2,
    });
    expect(runs.sendEmail).toBe(0);
  });

  it('prices 200 aliased mutations over the WebSocket at 11 each: over the budget, none sent', async () => {
    // Within the default maxAliases (200); each mutation field costs 10, and 1 as a root field:
    // 2,200 points, more than the 1,000 the budget holds.
    const reply = await overWebSocket(app.url, aliased(200, 'sendEmail', 'mutation '));
    expect(wsError(reply)?.extensions).toMatchObject({
      code: 'MAX_COST_EXCEEDED',
      cost: 2200,
      maxCost: 1000,
    });
    expect(runs.sendEmail).toBe(0);
  });

  it('refuses a document over maxTokens over the WebSocket with the parser’s error', async () => {
    // 3 tokens an alias: 120 aliases are 360 tokens > 300.
    const reply = await overWebSocket(tight.url, aliased(120, 'hello'));
    // Mercurius sends its own wrapper of the parser's error over its WebSocket.
    expect(wsError(reply)?.message).toMatch(
      server === 'apollo' ? /more tha[nt] 300 tokens/ : /^Graphql validation error$/,
    );
    expect(reply.next.every((r) => r.data === undefined || r.data === null)).toBe(true);
    expect(runs).toEqual(NO_RUNS);
  });

  it('prices a subscription once when it starts: one over a limit never starts', async () => {
    const refused = await overWebSocket(
      tight.url,
      'subscription { ticks { next { next { id } } } }',
    );
    expect(wsError(refused)?.extensions).toMatchObject({
      code: 'OPERATION_LIMIT_EXCEEDED',
      limit: 'maxDepth',
      measured: 4,
      maximum: 3,
    });
    expect(runs.ticks).toBe(0);
    const admitted = await overWebSocket(tight.url, 'subscription { ticks { id } }');
    expect(admitted.next).toEqual([{ data: { ticks: { id: 1 } } }]);
    expect(runs.ticks).toBe(1);
  });
});

/**
 * A subscription's slicing argument given as a variable: Apollo's graphql-ws prices it with the
 * variables sent; Mercurius's subscription hook is not told them, so a variable without a
 * default counts at the largest Int (2^31 − 1 items) and the subscription is refused by
 * `maxCost`, where it was priced at the default 10 items. A default in the document says nothing
 * of the value the client sent (`($n: Int = 2)` with `{ n: 5000000 }` ran 5,000,000 items for 3
 * points), so on Mercurius it counts as unknown too; a literal is read.
 */
describe.each(['apollo', 'mercurius'] as const)(
  'subscription variables that size a list on %s',
  (server) => {
    let app: LimitsApp;
    beforeAll(async () => {
      app = await startLimitsApp(server, {
        redis: redisUrl(),
        prefix: uniquePrefix(),
        timeoutMs: 2000,
        graphql: { maxCost: 1000, budget: '100000/h' },
      });
    });
    afterAll(() => app.close());
    beforeEach(resetRuns);

    const FEED = 'subscription ($n: Int) { feed(first: $n) { items { id } } }';
    const DELIVERED = [{ data: { feed: { items: [{ id: 0 }, { id: 1 }] } } }];

    it('a variable without a default: priced with its value on Apollo, at the most it could be on Mercurius', async () => {
      const reply = await overWebSocket(app.url, FEED, { n: 2 });
      if (server === 'apollo') {
        // Conn 1 + 2 items × Node 1 = 3 <= 1000: it starts
        expect(reply.next).toEqual(DELIVERED);
        expect(runs.feed).toBe(1);
      } else {
        // Conn 1 + 2147483647 items × Node 1 = 2147483648 > 1000 (was 1 + 10 = 11, admitted)
        expect(wsError(reply)?.extensions).toMatchObject({
          code: 'MAX_COST_EXCEEDED',
          cost: 2147483648,
          maxCost: 1000,
        });
        expect(runs.feed).toBe(0);
      }
    });

    it("a variable's default: the value sent on Apollo; on Mercurius, not told it, the most it could be", async () => {
      const defaulted = 'subscription ($n: Int = 2) { feed(first: $n) { items { id } } }';
      // The client overrides the default: Conn 1 + 5000000 × Node 1 on Apollo; on Mercurius
      // Conn 1 + 2147483647 × Node 1 (was priced 3 from the default, and ran 5,000,000 items)
      const overridden = await overWebSocket(app.url, defaulted, { n: 5000000 });
      expect(wsError(overridden)?.extensions).toMatchObject({
        code: 'MAX_COST_EXCEEDED',
        cost: server === 'apollo' ? 5000001 : 2147483648,
      });
      // No value sent: Conn 1 + 2 × Node 1 = 3 from the default on Apollo; unknown on Mercurius
      const plain = await overWebSocket(app.url, defaulted);
      if (server === 'apollo') expect(plain.next).toEqual(DELIVERED);
      else expect(wsError(plain)?.extensions).toMatchObject({ code: 'MAX_COST_EXCEEDED' });
      // Conn 1 + 5000 × Node 1 = 5001 > 1000, from the literal
      const literal = await overWebSocket(
        app.url,
        'subscription { feed(first: 5000) { items { id } } }',
      );
      expect(wsError(literal)?.extensions).toMatchObject({ code: 'MAX_COST_EXCEEDED', cost: 5001 });
      expect(runs.feed).toBe(server === 'apollo' ? 1 : 0);
    });
  },
);

/**
 * Over the WebSocket an operation is priced whole, as over HTTP, with the shape limits off:
 * Nest's graphql-ws server ran introspection (served by no Nest resolver) unpriced, and the
 * root fields beside a refused `hello`, when the operation was priced at its first resolver.
 */
describe.each(['apollo', 'mercurius'] as const)(
  'graphql-ws operations priced whole on %s',
  (server) => {
    let app: LimitsApp;
    beforeAll(async () => {
      app = await startLimitsApp(server, {
        redis: redisUrl(),
        prefix: uniquePrefix(),
        timeoutMs: 2000,
        graphql: {
          maxCost: 100,
          budget: '1000/h',
          maxAliases: Infinity,
          maxRootFields: Infinity,
          maxHeight: Infinity,
        },
      });
    });
    afterAll(() => app.close());
    beforeEach(resetRuns);

    it('refuses 500 aliased __schema by maxCost over HTTP and the WebSocket alike, 0 bytes of schema', async () => {
      const flood = aliased(500, '__schema { types { name fields { name } } }');
      const http = await operation(app.url, flood);
      expect(http.status).toBe(400);
      expect(http.body.errors![0]!.extensions).toMatchObject({
        code: 'MAX_COST_EXCEEDED',
        maxCost: 100,
      });
      const ws = await overWebSocket(app.url, flood);
      expect(wsError(ws)?.extensions).toMatchObject({
        code: 'MAX_COST_EXCEEDED',
        cost: http.body.errors![0]!.extensions!.cost,
        maxCost: 100,
      });
      expect(ws.next.every((r) => r.data === undefined || r.data === null)).toBe(true);
      expect(JSON.stringify(ws)).not.toContain('__Schema');
      expect(ws.bytes).toBeLessThan(1000);
    });

    it('refuses a hello beside costly introspection whole: neither runs', async () => {
      // 10 types × (1 + 10 fields × 1) + __schema 1 + hi 1 (a root field costs at least 1) =
      // 112 points > maxCost 100. `hi` is nullable: refused alone, it would leave the schema in
      // `data`.
      const reply = await overWebSocket(
        app.url,
        '{ __schema { types { name fields { name } } } hi }',
      );
      expect(wsError(reply)?.extensions).toMatchObject({ code: 'MAX_COST_EXCEEDED', cost: 112 });
      expect(JSON.stringify(reply)).not.toContain('"Query"');
      expect(runs).toEqual(NO_RUNS);
    });

    it('charges a query over the WebSocket, refunds down to its actual cost, and says so', async () => {
      const reply = await overWebSocket(app.url, '{ conn(first: 50) { total items { id } } }');
      expect(reply.next).toHaveLength(1);
      expect(reply.next[0]!.data).toEqual({ conn: { total: 2, items: [{ id: 0 }, { id: 1 }] } });
      const cost = reply.next[0]!.extensions?.cost as Record<string, number>;
      expect(cost.requestedQueryCost).toBeGreaterThan(cost.actualQueryCost!);
      expect(runs.conn).toBe(1);
    });
  },
);
