/**
 * docs/guides/common-setups.md, HTTP setups: each block as the page writes it, compiled, then
 * booted on Express and on Fastify against the shared test Redis; each test asserts what the
 * page says a client sees.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Module, type Type } from '@nestjs/common';
import { redisUrl } from '../harness/redis.js';
import type { Redis } from 'ioredis';
import { PLATFORMS, pollUntil } from '../e2e/support/app.js';
import { RedisLink } from '../e2e/support/redis-link.js';
import { RATE_LIMIT_REDIS, RateLimitModule } from './support/recipe-package.js';
import { recipeBlock, typeErrors, writeBlock } from './support/doc-blocks.js';
import { bootRecipe, sequence, signHs256, type RecipeApp } from './support/recipe-app.js';

const PAGE = 'docs/guides/common-setups.md';
const SECRET = 'a-test-secret-of-32-bytes-or-more!!';
const env = () => ({ REDIS_URL: redisUrl(), JWT_SECRET: SECRET });
const bearer = (sub: string, secret = SECRET) => ({
  authorization: `Bearer ${signHs256({ sub }, secret)}`,
});
const statuses = (replies: { status: number }[]) => replies.map((r) => r.status);

it('every recipe on the page compiles as a whole module', () => {
  const names = ['jwt-controller', 'jwt-global', 'api-key-tiers', 'login', 'public-api'];
  const files = names.map((name) => writeBlock(`${name}.check`, recipeBlock(PAGE, name)));
  expect(typeErrors(files)).toEqual([]);
}, 120_000);

describe.each(PLATFORMS)('JWT on a controller (@UseGuards), on %s', (platform) => {
  let h: RecipeApp;
  beforeAll(async () => {
    h = await bootRecipe(
      `jwt-controller.${platform}`,
      recipeBlock(PAGE, 'jwt-controller'),
      platform,
      env(),
    );
  });
  afterAll(() => h?.close());

  it('a user gets 10 a minute, then 429 with Retry-After: 6; another user from the same address has their own', async () => {
    const alice = await sequence(11, () => h.get('/orders', bearer('alice')));
    expect(statuses(alice)).toEqual([...Array(10).fill(200), 429]);
    expect(alice.map((r) => r.rl['x-ratelimit-remaining'])).toEqual([
      '9',
      '8',
      '7',
      '6',
      '5',
      '4',
      '3',
      '2',
      '1',
      '0',
      '0',
    ]);
    expect(alice[0]!.rl['x-ratelimit-limit']).toBe('10');
    expect(alice[0]!.rl['ratelimit-policy']).toBe('"default";q=10;w=60');
    expect(alice[10]!.headers.get('retry-after')).toBe('6');
    const bob = await h.get('/orders', bearer('bob'));
    expect(bob.status).toBe(200);
    expect(bob.rl['x-ratelimit-remaining']).toBe('9');
  });

  it('bad tokens get 401, and the 21st from one address gets 429 before the guard runs', async () => {
    const forged = await sequence(21, () => h.get('/orders', bearer('mallory', 'wrong-secret')));
    expect(statuses(forged)).toEqual([...Array(20).fill(401), 429]);
    // The address is spent: even a valid user behind it waits now.
    expect((await h.get('/orders', bearer('carol'))).status).toBe(429);
  });
});

describe.each(PLATFORMS)('JWT as a global APP_GUARD after the module, on %s', (platform) => {
  let h: RecipeApp;
  beforeAll(async () => {
    h = await bootRecipe(
      `jwt-global.${platform}`,
      recipeBlock(PAGE, 'jwt-global'),
      platform,
      env(),
    );
  });
  afterAll(() => h?.close());

  it('each user gets 10 a minute across the API, whatever the module order', async () => {
    const alice = await sequence(11, () => h.get('/profile', bearer('alice')));
    expect(statuses(alice)).toEqual([...Array(10).fill(200), 429]);
    expect(alice[10]!.headers.get('retry-after')).toBe('6');
    expect((await h.get('/profile', bearer('bob'))).rl['x-ratelimit-remaining']).toBe('9');
  });

  it('a public route is limited by address; bad tokens get 401, then 429 from the 21st', async () => {
    const status = await h.get('/status');
    expect(status.status).toBe(200);
    expect(status.rl['x-ratelimit-remaining']).toBe('9');
    const forged = await sequence(21, () => h.get('/profile', bearer('mallory', 'wrong')));
    expect(statuses(forged)).toEqual([...Array(20).fill(401), 429]);
  });
});

describe.each(PLATFORMS)('JWT as a global APP_GUARD before the module, on %s', (platform) => {
  let h: RecipeApp;
  beforeAll(async () => {
    // The page's classes, with AuthModule imported first.
    h = await bootRecipe(
      `jwt-global-first.${platform}`,
      recipeBlock(PAGE, 'jwt-global'),
      platform,
      env(),
      (e) => {
        @Module({
          imports: [
            e.AuthModule as Type,
            RateLimitModule.forRoot({ redis: redisUrl(), default: '10/m' }),
          ],
          controllers: [e.ApiController as Type],
        })
        class AuthFirstModule {}
        return AuthFirstModule;
      },
    );
  });
  afterAll(() => h?.close());

  it('users are still limited per user, but 401s are not counted: no 429 for token guessing', async () => {
    const alice = await sequence(11, () => h.get('/profile', bearer('alice')));
    expect(statuses(alice)).toEqual([...Array(10).fill(200), 429]);
    const forged = await sequence(25, () => h.get('/profile', bearer('mallory', 'wrong')));
    expect(statuses(forged)).toEqual(Array(25).fill(401));
    expect(forged[0]!.rl).toEqual({});
  });
});

describe.each(PLATFORMS)('API keys with free and pro tiers, on %s', (platform) => {
  let h: RecipeApp;
  beforeAll(async () => {
    h = await bootRecipe(
      `api-key-tiers.${platform}`,
      recipeBlock(PAGE, 'api-key-tiers'),
      platform,
      env(),
    );
  });
  afterAll(() => h?.close());

  it('a free key gets 10 a minute, then 429 with Retry-After: 6', async () => {
    const free = await sequence(11, () => h.get('/reports', { 'x-api-key': 'free-key' }));
    expect(statuses(free)).toEqual([...Array(10).fill(200), 429]);
    expect(free[0]!.rl['x-ratelimit-limit']).toBe('10');
    expect(free[0]!.rl['ratelimit-policy']).toBe('"default";q=10;w=60');
    expect(free[10]!.headers.get('retry-after')).toBe('6');
  });

  it('a pro key gets 100 a minute', async () => {
    const pro = await h.get('/reports', { 'x-api-key': 'pro-key' });
    expect(pro.status).toBe(200);
    expect(pro.rl['x-ratelimit-limit']).toBe('100');
    expect(pro.rl['x-ratelimit-remaining']).toBe('99');
    expect(pro.rl['ratelimit-policy']).toBe('"default";q=100;w=60');
  });

  it('an unknown key gets 401, counted against the address: the 21st gets 429', async () => {
    const unknown = await sequence(21, () => h.get('/reports', { 'x-api-key': 'stolen' }));
    expect(statuses(unknown)).toEqual([...Array(20).fill(401), 429]);
  });
});

describe.each(PLATFORMS)('a login limit per address, fail-closed, on %s', (platform) => {
  let link: RedisLink;
  let h: RecipeApp;
  beforeAll(async () => {
    link = await RedisLink.open(redisUrl());
    h = await bootRecipe(`login.${platform}`, recipeBlock(PAGE, 'login'), platform, {
      REDIS_URL: link.url,
    });
  });
  afterAll(async () => {
    await h?.close();
    await link?.close();
  });

  const login = (password: string) =>
    h.send('POST', '/auth/login', {}, { username: 'ann', password });

  it('5 attempts a minute, right or wrong; the 6th gets 429, Retry-After: 12, no wait in the body', async () => {
    const replies = [
      ...(await sequence(4, () => login('wrong'))),
      ...(await sequence(2, () => login('right'))),
    ];
    expect(statuses(replies)).toEqual([401, 401, 401, 401, 201, 429]);
    expect(replies.slice(0, 5).map((r) => r.rl['x-ratelimit-remaining'])).toEqual([
      '4',
      '3',
      '2',
      '1',
      '0',
    ]);
    expect(replies[5]!.headers.get('retry-after')).toBe('12');
    expect(replies[5]!.body).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: expect.any(String),
    });
  });
});

describe.each(PLATFORMS)('a login limit with Redis unreachable, on %s', (platform) => {
  let link: RedisLink;
  let h: RecipeApp;
  beforeAll(async () => {
    link = await RedisLink.open(redisUrl());
    h = await bootRecipe(`login-down.${platform}`, recipeBlock(PAGE, 'login'), platform, {
      REDIS_URL: link.url,
    });
    link.cut();
  });
  afterAll(async () => {
    // Reconnected before closing: a client closed mid-reconnect leaves its timer behind.
    link?.restore();
    const client = h?.app.get<Redis>(RATE_LIMIT_REDIS);
    await pollUntil(() => Promise.resolve(client?.status === 'ready'), 10_000);
    await h?.close();
    await link?.close();
  });

  it('answers 503 with Retry-After: 1', async () => {
    const reply = await h.send('POST', '/auth/login', {}, { username: 'ann', password: 'right' });
    expect(reply.status).toBe(503);
    expect(reply.headers.get('retry-after')).toBe('1');
    expect(reply.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: expect.any(String),
      retryAfter: 1,
    });
  });
});

describe.each(PLATFORMS)('a public API per IP behind one load balancer, on %s', (platform) => {
  let h: RecipeApp;
  beforeAll(async () => {
    h = await bootRecipe(
      `public-api.${platform}`,
      recipeBlock(PAGE, 'public-api'),
      platform,
      env(),
    );
  });
  afterAll(() => h?.close());

  const via = (forwardedFor: string) => h.get('/quotes', { 'x-forwarded-for': forwardedFor });

  it('each address its own 60 a minute; a spoofed left entry of X-Forwarded-For gains nothing', async () => {
    const first = await via('203.0.113.7');
    expect(first.rl['x-ratelimit-limit']).toBe('60');
    expect(first.rl['x-ratelimit-remaining']).toBe('59');
    expect((await via('198.51.100.1, 203.0.113.7')).rl['x-ratelimit-remaining']).toBe('58');
    expect((await via('203.0.113.8')).rl['x-ratelimit-remaining']).toBe('59');
  });

  it('the 61st from one address gets 429 with Retry-After: 1', async () => {
    const replies = await sequence(61, () => via('203.0.113.9'));
    expect(statuses(replies)).toEqual([...Array(60).fill(200), 429]);
    expect(replies[60]!.headers.get('retry-after')).toBe('1');
  });

  it('the health check is never limited and carries no headers', async () => {
    const replies = await sequence(3, () => h.get('/health'));
    expect(statuses(replies)).toEqual([200, 200, 200]);
    expect(replies.map((r) => r.rl)).toEqual([{}, {}, {}]);
  });
});
