/**
 * docs/guides/common-setups.md, the GraphQL setup: the page's module as written, run on Apollo
 * and Express; with the page's two Mercurius lines in place of Apollo's, compiled.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { redisUrl } from '../harness/redis.js';
import { parseRateLimit, type Platform } from '../e2e/support/app.js';
import { recipeBlock, typeErrors, writeBlock } from './support/doc-blocks.js';
import { bootRecipe, type RecipeApp } from './support/recipe-app.js';

const PAGE = 'docs/guides/common-setups.md';

/** The page's module; on Fastify its Apollo import and driver lines replaced by Mercurius's. */
function recipe(platform: Platform): string {
  const apollo = recipeBlock(PAGE, 'graphql');
  if (platform === 'express') return apollo;
  const [importLine, driverLine] = recipeBlock(PAGE, 'graphql-mercurius').trim().split('\n');
  const lines = apollo.split('\n');
  const at = (start: string) => lines.findIndex((l) => l.trim().startsWith(start));
  const importAt = at('import { ApolloDriver');
  const driverAt = at('GraphQLModule.forRoot<ApolloDriverConfig>');
  expect([importAt, driverAt].every((i) => i >= 0)).toBe(true);
  lines[importAt] = importLine!;
  lines[driverAt] = driverLine!;
  return lines.join('\n');
}

it('the GraphQL recipe compiles, on Apollo and with the Mercurius lines', () => {
  const files = (['express', 'fastify'] as const).map((p) =>
    writeBlock(`graphql.check.${p}`, recipe(p)),
  );
  expect(typeErrors(files)).toEqual([]);
}, 120_000);

// Mercurius is compiled above but not booted here: under Jest's ESM runtime, loading
// @nestjs/mercurius from this suite fails in @fastify/static (content-disposition is ESM-only).
describe.each(['express'] as const)('a GraphQL API with an operation budget, on %s', (platform) => {
  let h: RecipeApp;
  beforeAll(async () => {
    h = await bootRecipe(`graphql.${platform}`, recipe(platform), platform, {
      REDIS_URL: redisUrl(),
    });
  });
  afterAll(() => h?.close());

  const books = (first: number) =>
    h.send('POST', '/graphql', {}, { query: `{ books(first: ${first}) { title } }` });

  it('400 points per query of 400 books: two answered, the third 429 RATE_LIMITED with the wait', async () => {
    const first = await books(400);
    expect(first.status).toBe(200);
    expect((first.body as { data: { books: unknown[] } }).data.books).toHaveLength(400);
    expect(first.rl['ratelimit-policy']).toBe('"cost";q=1000;w=3600');
    expect(parseRateLimit(first.headers.get('ratelimit')).cost!.r).toBe(600);
    const second = await books(400);
    expect(parseRateLimit(second.headers.get('ratelimit')).cost!.r).toBe(200);
    const third = await books(400);
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('720');
    expect((third.body as { errors: { extensions: unknown }[] }).errors[0]!.extensions).toEqual(
      expect.objectContaining({ code: 'RATE_LIMITED', cost: 400, retryAfter: 720 }),
    );
  });

  it('over maxCost: 400 MAX_COST_EXCEEDED, nothing spent', async () => {
    const reply = await books(501);
    expect(reply.status).toBe(400);
    expect((reply.body as { errors: { extensions: unknown }[] }).errors[0]!.extensions).toEqual(
      expect.objectContaining({ code: 'MAX_COST_EXCEEDED', cost: 501, maxCost: 500 }),
    );
  });
});
