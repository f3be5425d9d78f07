import { INestApplication } from '@nestjs/common';
import {
  FastifyAdapter,
  NestFastifyApplication,
} from '@nestjs/platform-fastify';
import { Test, TestingModule } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import {
  RATE_LIMIT_REDIS,
  RateLimitModule,
  RateLimitModuleOptions,
  RateLimitService,
} from 'nest-rate-limit';
import request from 'supertest';
import { App } from 'supertest/types';
import { CatsModule } from './../src/cats/cats.module';

// supertest calls over IPv4 loopback, and an anonymous client is counted by its address.
const CLIENT = 'ip:127.0.0.1';
const POLICY = '"default";q=3;w=60';

function redisUrl(): string {
  const url = process.env.REDIS_URL;
  if (!url) {
    throw new Error(
      'REDIS_URL is not set: the Redis tests need a Redis they may write to, ' +
        'e.g. REDIS_URL=redis://127.0.0.1:6379 (scripts/test-consumers.sh starts one)',
    );
  }
  return url;
}

// A prefix of its own per run, so runs sharing a Redis never see each other's counts.
const prefix = `cats-e2e-${process.pid}-${Date.now()}`;
const stores: [string, () => RateLimitModuleOptions][] = [
  ['the memory store', () => ({ store: 'memory', prefix })],
  ['Redis', () => ({ redis: redisUrl(), prefix })],
];

const platforms = ['Express', 'Fastify'];

async function createApp(
  platform: string,
  moduleRef: TestingModule,
): Promise<INestApplication<App>> {
  if (platform === 'Fastify') {
    const app = moduleRef.createNestApplication<NestFastifyApplication>(
      new FastifyAdapter(),
    );
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
    return app;
  }
  const app = moduleRef.createNestApplication<INestApplication<App>>();
  await app.init();
  return app;
}

describe.each(platforms)('CatsController (e2e) on %s', (platform) => {
  describe.each(stores)('with %s', (store, options) => {
    let app: INestApplication<App>;
    let limits: RateLimitService;

    beforeAll(async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [RateLimitModule.forRoot(options()), CatsModule],
      }).compile();
      app = await createApp(platform, moduleRef);
      limits = app.get(RateLimitService);
    });

    // How to reset limits between tests: forget what the client has spent.
    beforeEach(async () => {
      await limits.reset(CLIENT);
    });

    afterAll(async () => {
      await app?.close();
    });

    const spendAll = async () => {
      for (let i = 0; i < 3; i++)
        await request(app.getHttpServer()).get('/cats').expect(200);
    };

    it('admits 3 requests a minute, then answers 429 with Retry-After and the RateLimit headers', async () => {
      for (const [remaining, reset] of [
        [2, 20],
        [1, 40],
        [0, 60],
      ]) {
        const res = await request(app.getHttpServer()).get('/cats').expect(200);
        expect(res.body).toEqual(['Tom', 'Felix']);
        expect(res.headers['ratelimit-policy']).toBe(POLICY);
        expect(res.headers['ratelimit']).toBe(
          `"default";r=${remaining};t=${reset}`,
        );
        expect(res.headers['x-ratelimit-limit']).toBe('3');
        expect(res.headers['x-ratelimit-remaining']).toBe(String(remaining));
      }

      const refused = await request(app.getHttpServer())
        .get('/cats')
        .expect(429);
      const retryAfter = Number(refused.headers['retry-after']);
      expect(Number.isInteger(retryAfter)).toBe(true);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(20);
      expect(refused.headers['ratelimit-policy']).toBe(POLICY);
      expect(refused.headers['ratelimit']).toBe(
        `"default";r=0;t=${retryAfter}`,
      );
      expect(refused.headers['x-ratelimit-remaining']).toBe('0');
      expect(refused.body).toEqual({
        statusCode: 429,
        error: 'Too Many Requests',
        message: `Too many requests; retry in ${retryAfter} s`,
        retryAfter,
      });
    });

    it('does not limit the route marked @SkipRateLimit()', async () => {
      await spendAll();
      await request(app.getHttpServer()).get('/cats').expect(429);
      for (let i = 0; i < 5; i++) {
        const res = await request(app.getHttpServer())
          .get('/cats/health')
          .expect(200);
        expect(res.body).toEqual({ status: 'ok' });
        expect(res.headers['ratelimit']).toBeUndefined();
      }
    });

    it('lets the client in again after RateLimitService.reset', async () => {
      await spendAll();
      await request(app.getHttpServer()).get('/cats').expect(429);

      expect(await limits.reset(CLIENT)).toBeGreaterThanOrEqual(1);

      const res = await request(app.getHttpServer()).get('/cats').expect(200);
      expect(res.headers['ratelimit']).toBe('"default";r=2;t=20');
    });

    it(`keeps the count in ${store}`, async () => {
      await request(app.getHttpServer()).get('/cats').expect(200);

      const [state] = await limits.inspect(CLIENT);
      expect(state).toMatchObject({
        key: `${prefix}:{${CLIENT}}:CatsController.findAll::tb`,
        scope: 'CatsController.findAll',
        policy: 'default',
        limit: 3,
        remaining: 2,
      });
      const redis = app.get<Redis | undefined>(RATE_LIMIT_REDIS);
      if (store === 'Redis') expect(await redis?.exists(state.key)).toBe(1);
      else expect(redis).toBeFalsy();
    });
  });
});
