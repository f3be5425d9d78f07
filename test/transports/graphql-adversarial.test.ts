/**
 * Documents whose analysis cost the server more than the request (issue 32), on Apollo
 * (Express) and Mercurius (Fastify): each is answered within a CPU budget of the process that
 * runs the app (this one: CPU time, never wall-clock, and generous), before any resolver, and
 * the app answers a normal query next.
 *
 * Before: the 649-byte fragment chain blocked the event loop 4.4 s (Apollo) / 4.3 s
 * (Mercurius), the 734-byte one 44.7 s; the 93 KB S × M document 14.5 s / 17.1 s.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { redisUrl } from '../harness/redis.js';
import { uniquePrefix } from '../e2e/support/app.js';
import { loadableMercurius } from './support/mercurius-interop.js';
import { aliasesTimesFragments } from '../../bench/graphql/documents.js';

await loadableMercurius();
const { operation, resetRuns, runs, startLimitsApp } = await import('./support/limits-app.js');
type LimitsApp = Awaited<ReturnType<typeof startLimitsApp>>;

/** CPU milliseconds a document may cost this process: far below the seconds it cost before. */
const CPU_BUDGET_MS = 1500;

/**
 * The same for graphql-js's own validation giving up on a document (`Validation aborted.`,
 * no hook of ours): its CPU time, which a loaded CI machine stretched to 1.74 s, against the
 * 14.5 to 17.1 s the analysis took before.
 */
const VALIDATION_CPU_BUDGET_MS = 5000;

/**
 * `query Q { ...F1 }` where each of `F1`…`F{levels - 1}` spreads the next one ten times and the
 * last is `{ __typename }`: valid, and priced 1 point, but a walk that expands every spread
 * visits 10^(levels - 1) of them. 8 levels: 649 bytes; 9: 734.
 */
function fragmentChain(levels: number): string {
  const fragments = Array.from({ length: levels }, (_, i) =>
    i === levels - 1
      ? `fragment F${i + 1} on Query { __typename }`
      : `fragment F${i + 1} on Query { ${`...F${i + 2} `.repeat(10)}}`,
  );
  return `query Q { ...F1 } ${fragments.join(' ')}\n`;
}

/**
 * S aliases of `nodes(first: N) { ...A1 }`, each with its own N, and a chain of M fragments on
 * the list's type, `A1` to `AM`: a walk memoised by the size handed down walks S × M selection
 * sets. 1,000 × 1,500: 90 KB, under Express's 100 KB body limit; 2,000 × 300: 80 KB.
 */
function pagesTimesChain(s: number, m: number): string {
  const aliases = Array.from({ length: s }, (_, i) => `a${i}: nodes(first: ${i + 1}) { ...A1 }`);
  const chain = Array.from({ length: m }, (_, i) =>
    i === m - 1
      ? `fragment A${i + 1} on Node { id }`
      : `fragment A${i + 1} on Node { id ...A${i + 2} }`,
  );
  return `{ ${aliases.join(' ')} } ${chain.join(' ')}`;
}

/** The reply to `query`, and the CPU this process spent meanwhile, in ms. */
async function timed(app: LimitsApp, query: string) {
  const start = process.cpuUsage();
  const reply = await operation(app.url, query);
  const used = process.cpuUsage(start);
  return { reply, cpuMs: (used.user + used.system) / 1000 };
}

describe.each(['apollo', 'mercurius'] as const)('adversarial documents on %s', (server) => {
  let app: LimitsApp;
  /** Every shape limit and the parser's token limit off: only the analysis's step budget. */
  let open: LimitsApp;
  /** The token limit off: the shape limits first. */
  let untokened: LimitsApp;

  beforeAll(async () => {
    const base = { redis: redisUrl(), timeoutMs: 2000 };
    const graphql = { budget: '1000/h', maxCost: 10_000 };
    [app, open, untokened] = await Promise.all([
      startLimitsApp(server, { ...base, prefix: uniquePrefix(), graphql }),
      startLimitsApp(server, {
        ...base,
        prefix: uniquePrefix(),
        graphql: {
          ...graphql,
          maxTokens: Infinity,
          maxDepth: Infinity,
          maxHeight: Infinity,
          maxAliases: Infinity,
          maxRootFields: Infinity,
        },
      }),
      startLimitsApp(server, {
        ...base,
        prefix: uniquePrefix(),
        graphql: { ...graphql, maxTokens: Infinity },
      }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([app.close(), open.close(), untokened.close()]);
  });
  beforeEach(resetRuns);

  async function answersNormally(target: LimitsApp): Promise<void> {
    const next = await operation(target.url, '{ hello }');
    expect(next.body.data).toEqual({ hello: 'world' });
  }

  it.each([
    [8, 649],
    [9, 734],
  ])(
    'answers the %i-level fragment chain (%i bytes) within the CPU budget',
    async (levels, bytes) => {
      const query = fragmentChain(levels);
      expect(query).toHaveLength(bytes);
      for (const target of [app, open]) {
        const { reply, cpuMs } = await timed(target, query);
        expect(cpuMs).toBeLessThan(CPU_BUDGET_MS);
        // The default maxRootFields counts the root's `__typename` at each of its 10^(levels-1)
        // spreads; with every limit off, the step budget refuses it, or it is priced 1 point.
        if (target === app) {
          expect(reply.status).toBe(400);
          expect(reply.body.errors![0]!.extensions).toMatchObject({
            code: 'OPERATION_LIMIT_EXCEEDED',
            limit: 'maxRootFields',
            maximum: 100,
          });
        } else if (reply.status === 400) {
          expect(reply.body.errors![0]!.extensions).toMatchObject({
            code: 'COST_ANALYSIS_LIMIT_EXCEEDED',
            limit: 'maxAnalysisSteps',
          });
        } else {
          expect(reply.body.data).toEqual({ __typename: 'Query' });
        }
        await answersNormally(target);
      }
    },
  );

  it.each([
    [1000, 1500],
    [2000, 300],
  ])(
    'refuses the %i × %i document before any resolver: tokens, then shape, then analysis',
    async (s, m) => {
      const query = pagesTimesChain(s, m);
      expect(query.length).toBeGreaterThan(80_000);
      expect(query.length).toBeLessThan(100_000);

      // 1,000 × 12 + 1,500 × 7 tokens (2,000 × 12 + 300 × 7): over the default 15,000.
      const parsed = await timed(app, query);
      expect(parsed.cpuMs).toBeLessThan(CPU_BUDGET_MS);
      expect(parsed.reply.status).toBe(400);
      expect(parsed.reply.body.errors![0]!.message).toMatch(/more tha[nt] 15000 tokens/);
      if (server === 'apollo') {
        expect(parsed.reply.body.errors![0]!.extensions).toMatchObject({
          code: 'GRAPHQL_PARSE_FAILED',
        });
      }

      // Without the token limit: graphql-js's own validation gives up on the 1,000 × 1,500
      // document (OverlappingFieldsCanBeMerged's budget, before any hook of ours); the shape
      // limits refuse the 2,000 × 300 one (its fragments count at each of their spreads).
      const shaped = await timed(untokened, query);
      expect(shaped.cpuMs).toBeLessThan(s === 1000 ? VALIDATION_CPU_BUDGET_MS : CPU_BUDGET_MS);
      expect(shaped.reply.status).toBe(400);
      const refusal = shaped.reply.body.errors![0]!;
      if (s === 1000) expect(refusal.message).toBe('Validation aborted.');
      else {
        expect(refusal.extensions).toMatchObject({ code: 'OPERATION_LIMIT_EXCEEDED' });
        expect(['maxAliases', 'maxHeight']).toContain(refusal.extensions!.limit);
      }

      // Every limit off: the analysis prices the 2,000 × 300 document (2,001,000 points) or
      // runs out of steps.
      const walked = await timed(open, query);
      expect(walked.cpuMs).toBeLessThan(CPU_BUDGET_MS * 2);
      expect(walked.reply.status).toBe(400);
      expect(walked.reply.body.errors).toHaveLength(1);
      const { message, extensions } = walked.reply.body.errors![0]!;
      if (s === 1000) expect(message).toBe('Validation aborted.');
      else
        expect(['COST_ANALYSIS_LIMIT_EXCEEDED', 'MAX_COST_EXCEEDED']).toContain(extensions!.code);
      expect(runs.nodes).toBe(0);
      for (const target of [app, untokened, open]) await answersNormally(target);
    },
  );

  it('refuses the issue’s 93 KB S × M document (1,600 × 1,350 on the page object) before any resolver', async () => {
    // Before: 400 MAX_COST_EXCEEDED after 14.5 s (Apollo) / 17.1 s (Mercurius) of analysis.
    const { query } = aliasesTimesFragments(1600, 1350);
    expect(query.length).toBeGreaterThan(90_000);
    expect(query.length).toBeLessThan(100_000);
    const parsed = await timed(app, query);
    expect(parsed.cpuMs).toBeLessThan(CPU_BUDGET_MS);
    expect(parsed.reply.status).toBe(400);
    expect(parsed.reply.body.errors![0]!.message).toMatch(/more tha[nt] 15000 tokens/);
    // Without the token limit, graphql-js's own validation gives up on it
    // (OverlappingFieldsCanBeMerged's budget), before any hook of ours.
    for (const target of [untokened, open]) {
      const { reply, cpuMs } = await timed(target, query);
      expect(cpuMs).toBeLessThan(VALIDATION_CPU_BUDGET_MS);
      expect(reply.status).toBe(400);
      expect(reply.body.errors![0]!.message).toBe('Validation aborted.');
    }
    expect(runs.conn).toBe(0);
    for (const target of [app, untokened, open]) await answersNormally(target);
  });
});
