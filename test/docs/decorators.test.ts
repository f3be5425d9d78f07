/**
 * docs/reference/decorators.md: the `@SkipRateLimit` block as the page writes it, compiled,
 * then booted on Express and on Fastify (memory store); each test asserts what its comments
 * say a route gets.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Module, type Type } from '@nestjs/common';
import { PLATFORMS } from '../e2e/support/app.js';
import { RateLimitModule } from './support/recipe-package.js';
import { recipeBlock, typeErrors, writeBlock } from './support/doc-blocks.js';
import { bootRecipe, sequence, type RecipeApp } from './support/recipe-app.js';

const PAGE = 'docs/reference/decorators.md';

it('the @SkipRateLimit block compiles as a whole module', () => {
  const file = writeBlock('skip-rate-limit.check', recipeBlock(PAGE, 'skip-rate-limit'));
  expect(typeErrors([file])).toEqual([]);
}, 120_000);

describe.each(PLATFORMS)('@SkipRateLimit as the reference writes it, on %s', (platform) => {
  let h: RecipeApp;
  beforeAll(async () => {
    h = await bootRecipe(
      `skip-rate-limit.${platform}`,
      recipeBlock(PAGE, 'skip-rate-limit'),
      platform,
      {},
      (exports) => {
        class App {}
        const imports = [RateLimitModule.forRoot({ store: 'memory', default: '1000/h' })];
        return Module({ imports, controllers: [exports.ReportsController as Type] })(App) ?? App;
      },
    );
  });
  afterAll(() => h?.close());

  it('health: neither burst nor daily (nor the module default): no limit, no headers', async () => {
    const replies = await sequence(12, () => h.get('/reports/health'));
    expect(replies.map((r) => r.status)).toEqual(Array(12).fill(200));
    expect(replies.map((r) => r.rl)).toEqual(Array(12).fill({}));
  });

  it("preview: burst and the module's default, daily dropped", async () => {
    const reply = await h.get('/reports/preview');
    expect(reply.rl['ratelimit-policy']).toBe('"default";q=1000;w=3600, "burst";q=10;w=1');
  });

  it('bulk: its own 5/m only, under its own @SkipRateLimit()', async () => {
    const replies = await sequence(6, () => h.get('/reports/bulk'));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(replies[0]!.rl['ratelimit-policy']).toBe('"default";q=5;w=60');
  });
});
