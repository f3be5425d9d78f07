/**
 * Extension by subclassing (issue 13): a `RateLimitGuard` subclass holds wherever it is
 * registered, as the module's `guard` option or as an `APP_GUARD` of the app's own, and a
 * custom `refuse` keeps `Retry-After` and the rate-limit headers. The README example is
 * run word for word.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module, Post, type Type } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { readFileSync } from 'node:fs';
import { ConfigModule, ConfigService } from '@nestjs/config';
import {
  RateLimit,
  RateLimitConfigError,
  RateLimitGuard,
  RateLimitModule,
} from '../../lib/index.js';
import { newRedis, redisUrl } from '../harness/redis.js';
import { AppRateLimitGuard } from './support/app-rate-limit.guard.js';
import { bootstrap, createApp, PLATFORMS, uniquePrefix, type Platform } from './support/app.js';

const README = readFileSync(
  new URL('../../docs/reference/module-options.md', import.meta.url),
  'utf8',
);

@Controller('orders')
class OrdersController {
  @Post()
  @RateLimit('3/m')
  create() {
    return { created: true };
  }
}

async function post(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/orders`, { method: 'POST', headers });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: text.startsWith('{') ? JSON.parse(text) : text,
  };
}

async function listen(platform: Platform, module: Type) {
  const app = await bootstrap(platform, module);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  return { app, url };
}

describe('the docs guard example', () => {
  it('is the guard these tests run, word for word', () => {
    const source = readFileSync(
      new URL('./support/app-rate-limit.guard.ts', import.meta.url),
      'utf8',
    );
    const example = /```ts\n(import \{ HttpException[\s\S]*?)\n\/\/ RateLimitModule/.exec(
      README,
    )![1]!;
    const used = source
      .slice(source.indexOf('import { HttpException'))
      .replace("from '../../../lib/index.js'", "from 'nest-rate-limit'");
    expect(used.trimEnd()).toBe(example.trimEnd());
  });
});

describe.each(PLATFORMS)('a RateLimitGuard subclass on %s', (platform) => {
  describe("as the module's guard option", () => {
    let h: Awaited<ReturnType<typeof createApp>>;
    beforeAll(async () => {
      h = await createApp(platform, { guard: AppRateLimitGuard }, [OrdersController]);
    });
    afterAll(() => h?.close());

    it('skips what its shouldSkip says, and limits the rest', async () => {
      const partner = [];
      for (let i = 0; i < 5; i++)
        partner.push((await post(h.url, { 'x-partner-key': 'partner-1' })).status);
      expect(partner).toEqual([201, 201, 201, 201, 201]);
      const others = [];
      for (let i = 0; i < 4; i++) others.push((await post(h.url)).status);
      expect(others).toEqual([201, 201, 201, 429]);
    });

    it('refuses with its own body, and keeps Retry-After and the rate-limit headers', async () => {
      const refused = await post(h.url);
      expect(refused.status).toBe(429);
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(refused.body).toEqual({ error: 'slow_down', retryAfter });
      expect(refused.headers.get('ratelimit-policy')).toBe('"default";q=3;w=60');
      expect(refused.headers.get('ratelimit')).toBe(`"default";r=0;t=${retryAfter}`);
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
    });
  });

  // Regression: registered as APP_GUARD in a module imported after RateLimitModule, the
  // subclass was never consulted (the module's guard decided first): partner requests
  // got 201 201 201 429 429.
  describe('as an APP_GUARD of a module imported after RateLimitModule', () => {
    let app: Awaited<ReturnType<typeof listen>>;
    beforeAll(async () => {
      @Module({ providers: [{ provide: APP_GUARD, useClass: AppRateLimitGuard }] })
      class GuardsModule {}
      @Module({
        imports: [
          RateLimitModule.forRoot({ redis: redisUrl(), prefix: uniquePrefix(), timeoutMs: 2000 }),
          GuardsModule,
        ],
        controllers: [OrdersController],
      })
      class AppModule {}
      app = await listen(platform, AppModule);
    });
    afterAll(() => app?.app.close());

    it('decides instead of the module guard', async () => {
      const partner = [];
      for (let i = 0; i < 5; i++)
        partner.push((await post(app.url, { 'x-partner-key': 'partner-1' })).status);
      expect(partner).toEqual([201, 201, 201, 201, 201]);
      const others = [];
      for (let i = 0; i < 4; i++) others.push(await post(app.url));
      expect(others.map((r) => r.status)).toEqual([201, 201, 201, 429]);
      expect(others[3]!.body).toEqual({
        error: 'slow_down',
        retryAfter: Number(others[3]!.headers.get('retry-after')),
      });
    });
  });

  it('a guard option that is no RateLimitGuard subclass fails, naming it', () => {
    class NotAGuard {}
    expect(() => RateLimitModule.forRoot({ guard: NotAGuard as never })).toThrow(
      RateLimitConfigError,
    );
    expect(() => RateLimitModule.forRoot({ guard: NotAGuard as never })).toThrow(
      /^invalid guard NotAGuard: expected a class that extends RateLimitGuard \(in RateLimitModule\.forRoot\)/,
    );
  });
});

describe.each(PLATFORMS)('forRootAsync on %s', (platform) => {
  // The README's example, word for word (checked below), in an app of its own.
  const readmeModule = () =>
    RateLimitModule.forRootAsync({
      imports: [ConfigModule],
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({
        redis: config.get<string>('REDIS_URL'),
        prefix: config.get<string>('SERVICE_NAME'),
        default: '1000/h',
      }),
    });

  it('is the docs example, and limits with the options from the configuration', async () => {
    const example = /RateLimitModule\.forRootAsync\(\{[\s\S]*?\n\}\);/.exec(README)![0];
    const source = readFileSync(new URL(import.meta.url), 'utf8');
    expect(source).toContain(example.replace(/\n/g, '\n    ').replace(/\);$/, ');'));
    const prefix = uniquePrefix();
    @Module({
      imports: [
        ConfigModule.forRoot({
          isGlobal: true,
          ignoreEnvFile: true,
          load: [() => ({ REDIS_URL: redisUrl(), SERVICE_NAME: prefix })],
        }),
        readmeModule(),
      ],
      controllers: [OrdersController],
    })
    class ConfiguredApp {}
    const app = await listen(platform, ConfiguredApp);
    try {
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await post(app.url)).status);
      expect(statuses).toEqual([201, 201, 201, 429]);
      // The prefix came from the configuration (the route's own '3/m' is named `default` too,
      // and replaces the module's there).
      const redis = newRedis();
      try {
        expect(await redis.keys(`${prefix}:*`)).toEqual([
          `${prefix}:{ip:127.0.0.1}:OrdersController.create::tb`,
        ]);
      } finally {
        await redis.quit();
      }
    } finally {
      await app.app.close();
    }
  });

  it.each(['global', 'guard'] as const)(
    'a %s returned by the factory fails the start, saying where it belongs',
    async (option) => {
      @Module({
        imports: [
          RateLimitModule.forRootAsync({
            useFactory: () => ({
              store: 'memory',
              [option]: option === 'global' ? false : AppRateLimitGuard,
            }),
          }),
        ],
        controllers: [OrdersController],
      })
      class Misconfigured {}
      await expect(bootstrap(platform, Misconfigured)).rejects.toThrow(
        new RegExp(`^${option} returned by useFactory is ignored: give it to forRootAsync`),
      );
    },
  );

  it('guard: RateLimitGuard itself is the default, not an error', () => {
    expect(() => RateLimitModule.forRoot({ guard: RateLimitGuard })).not.toThrow();
  });
});
