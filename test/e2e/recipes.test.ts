/**
 * Every README recipe that reads the request or the user, as written, on Express and on
 * Fastify with authentication in a Nest middleware, which on Fastify puts the user on the
 * raw request (issue 12, item 1).
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Req } from '@nestjs/common';
import { byTier, keys, RateLimit, rateLimitContext } from '../../lib/index.js';
import { createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

// The recipes live in the getting-started guide, the `skip` one in the migration guide.
const readme = ['docs/guides/getting-started.md', 'docs/guides/migrating-from-throttler.md']
  .map((page) => readFileSync(new URL(`../../${page}`, import.meta.url), 'utf8'))
  .join('\n');

/** The recipes as the README writes them; the controller below uses each one verbatim. */
const RECIPES = {
  cost: "(ctx) => (String(rateLimitContext(ctx).request.query.filters ?? '').split(',').length > 5 ? 3 : 1)",
  tiers:
    "@RateLimit(byTier({ free: '100/h', pro: '5000/h' }, (ctx) => rateLimitContext(ctx).user?.plan, { fallback: 'free' }))",
  login:
    "@RateLimit('5/m', { key: keys.ip, failClosed: true, exposeDetails: false, scope: 'auth' })",
  skip: "skip: (ctx) => /bot/.test(rateLimitContext(ctx).request?.headers['user-agent'] ?? '')",
};

@Controller('recipes')
class RecipesController {
  @Get('search')
  @RateLimit('60/m', {
    cost: (ctx) =>
      String(rateLimitContext(ctx).request.query.filters ?? '').split(',').length > 5 ? 3 : 1,
  })
  search() {
    return 'ok';
  }

  @Get('plan')
  @RateLimit(
    byTier({ free: '100/h', pro: '5000/h' }, (ctx) => rateLimitContext(ctx).user?.plan, {
      fallback: 'free',
    }),
  )
  plan() {
    return 'ok';
  }

  @Get('login')
  @RateLimit('5/m', { key: keys.ip, failClosed: true, exposeDetails: false, scope: 'auth' })
  login() {
    return 'ok';
  }

  /** The default identity, `keys.userOrIp`. */
  @Get('mine')
  @RateLimit('2/m')
  mine() {
    return 'ok';
  }

  /** Where the middleware's user landed: the premise of the Fastify cases. */
  @Get('where')
  where(@Req() req: { user?: unknown; raw?: { user?: unknown } }) {
    return { onRequest: req.user !== undefined, onRaw: req.raw?.user !== undefined };
  }
}

it('the docs holds each recipe exactly as this suite runs it', () => {
  for (const recipe of Object.values(RECIPES)) expect(readme).toContain(recipe);
  // No recipe reaches for the HTTP request itself: it misses the middleware's user on Fastify.
  expect(readme).not.toMatch(/=> ctx\.switchToHttp\(\)/);
});

describe.each(PLATFORMS)('recipes of the docs on %s with middleware authentication', (platform) => {
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(
      platform,
      { skip: (ctx) => /bot/.test(rateLimitContext(ctx).request?.headers['user-agent'] ?? '') },
      [RecipesController],
      { authMiddleware: true },
    );
  });
  afterAll(() => h?.close());

  it('the middleware sets the user where Nest puts it on this platform', async () => {
    const reply = await h.get('/recipes/where', { 'x-user': 'w' });
    expect(reply.body).toEqual(
      platform === 'fastify'
        ? { onRequest: false, onRaw: true }
        : { onRequest: true, onRaw: false },
    );
  });

  it('plans: a paying user gets their tier, anyone else the fallback', async () => {
    const pro = await h.get('/recipes/plan', { 'x-user': 'payer', 'x-plan': 'pro' });
    expect(pro.status).toBe(200);
    expect(pro.rl['x-ratelimit-limit']).toBe('5000');
    expect(pro.rl['x-ratelimit-remaining']).toBe('4999');
    const free = await h.get('/recipes/plan', { 'x-user': 'saver', 'x-plan': 'free' });
    expect(free.rl['x-ratelimit-limit']).toBe('100');
    const unknown = await h.get('/recipes/plan', { 'x-user': 'odd', 'x-plan': 'gold' });
    expect(unknown.rl['x-ratelimit-limit']).toBe('100');
    const anonymous = await h.get('/recipes/plan');
    expect(anonymous.rl['x-ratelimit-limit']).toBe('100');
  });

  it('a per-request cost: more than 5 filters cost 3, fewer cost 1', async () => {
    const user = { 'x-user': 'searcher' };
    const heavy = await h.get('/recipes/search?filters=a,b,c,d,e,f', user);
    expect(heavy.rl['x-ratelimit-remaining']).toBe('57');
    const light = await h.get('/recipes/search?filters=a,b', user);
    expect(light.rl['x-ratelimit-remaining']).toBe('56');
    const none = await h.get('/recipes/search', user);
    expect(none.rl['x-ratelimit-remaining']).toBe('55');
  });

  it('the default identity counts each authenticated user on their own budget', async () => {
    const first = await times(3, () => h.get('/recipes/mine', { 'x-user': 'u1' }));
    expect(first.map((r) => r.status)).toEqual([200, 200, 429]);
    // Same address, another user: a budget of its own.
    expect((await h.get('/recipes/mine', { 'x-user': 'u2' })).status).toBe(200);
  });

  it('login per address: the sixth attempt is refused, with no wait in the body', async () => {
    const replies = await times(6, () => h.get('/recipes/login', { 'x-user': 'not-counted' }));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    const refused = replies[5]!;
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.body).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: expect.any(String),
    });
    // Keyed by address, not by user: another user from the same address is refused too.
    expect((await h.get('/recipes/login', { 'x-user': 'other' })).status).toBe(429);
  });

  it('skip by user agent: a bot is never limited nor told about limits', async () => {
    const bot = { 'user-agent': 'Googlebot/2.1', 'x-user': 'crawler' };
    const replies = await times(4, () => h.get('/recipes/mine', bot));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(replies.map((r) => r.rl)).toEqual([{}, {}, {}, {}]);
    const human = await h.get('/recipes/mine', {
      'user-agent': 'Mozilla/5.0',
      'x-user': 'crawler',
    });
    expect(human.rl['x-ratelimit-remaining']).toBe('1');
  });
});
