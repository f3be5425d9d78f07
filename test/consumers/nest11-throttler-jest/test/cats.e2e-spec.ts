import { Test, TestingModule } from '@nestjs/testing';
import { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { App } from 'supertest/types';
import { AppModule } from './../src/app.module';

const tooManyRequests = {
  statusCode: 429,
  message: 'ThrottlerException: Too Many Requests',
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('CatsController throttling (e2e)', () => {
  let app: INestApplication<App>;

  beforeEach(async () => {
    const moduleFixture: TestingModule = await Test.createTestingModule({
      imports: [AppModule],
    }).compile();

    app = moduleFixture.createNestApplication();
    await app.init();
  });

  afterEach(async () => {
    await app.close();
  });

  it('GET /cats: three per second, then 429 with Retry-After-short', async () => {
    for (let i = 1; i <= 3; i++) {
      const res = await request(app.getHttpServer()).get('/cats').expect(200);
      expect(res.body).toEqual([{ name: 'Tom' }]);
      expect(res.headers['x-ratelimit-limit-short']).toBe('3');
      expect(res.headers['x-ratelimit-remaining-short']).toBe(String(3 - i));
      expect(res.headers['x-ratelimit-reset-short']).toBe('1');
      expect(res.headers['x-ratelimit-limit-long']).toBe('20');
      expect(res.headers['x-ratelimit-remaining-long']).toBe(String(20 - i));
      expect(res.headers['x-ratelimit-reset-long']).toBe('60');
    }

    const refused = await request(app.getHttpServer()).get('/cats').expect(429);
    expect(refused.body).toEqual(tooManyRequests);
    expect(refused.headers['retry-after-short']).toBe('1');
    expect(refused.headers['retry-after-long']).toBeUndefined();
  });

  it('POST /cats: @Throttle overrides short to one per second', async () => {
    const created = await request(app.getHttpServer())
      .post('/cats')
      .send({ name: 'Felix' })
      .expect(201);
    expect(created.body).toEqual({ name: 'Felix' });
    expect(created.headers['x-ratelimit-limit-short']).toBe('1');
    expect(created.headers['x-ratelimit-remaining-short']).toBe('0');
    expect(created.headers['x-ratelimit-limit-long']).toBe('20');
    expect(created.headers['x-ratelimit-remaining-long']).toBe('19');

    const refused = await request(app.getHttpServer())
      .post('/cats')
      .send({ name: 'Garfield' })
      .expect(429);
    expect(refused.body).toEqual(tooManyRequests);
    expect(refused.headers['retry-after-short']).toBe('1');

    // The limit is per route: GET /cats still has its own budget.
    await request(app.getHttpServer()).get('/cats').expect(200);
  });

  it('lets the client in again once Retry-After has passed', async () => {
    await request(app.getHttpServer())
      .post('/cats')
      .send({ name: 'Felix' })
      .expect(201);
    const refused = await request(app.getHttpServer())
      .post('/cats')
      .send({ name: 'Garfield' })
      .expect(429);

    await sleep(Number(refused.headers['retry-after-short']) * 1000 + 100);

    const again = await request(app.getHttpServer())
      .post('/cats')
      .send({ name: 'Garfield' })
      .expect(201);
    expect(again.headers['x-ratelimit-remaining-short']).toBe('0');
  });

  it('GET /cats/health: @SkipThrottle({ short, long }), never limited, no headers', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await request(app.getHttpServer())
        .get('/cats/health')
        .expect(200);
      expect(res.body).toEqual({ status: 'ok' });
      expect(res.headers['x-ratelimit-limit-short']).toBeUndefined();
      expect(res.headers['x-ratelimit-limit-long']).toBeUndefined();
    }
  });

  it('counts each x-api-key apart, and clients without one by IP', async () => {
    const post = (apiKey?: string) => {
      const req = request(app.getHttpServer())
        .post('/cats')
        .send({ name: 'Felix' });
      return apiKey ? req.set('x-api-key', apiKey) : req;
    };

    await post('alpha').expect(201);
    const refused = await post('alpha').expect(429);
    expect(refused.body).toEqual(tooManyRequests);

    await post('beta').expect(201);
    await post('beta').expect(429);
    await post().expect(201);
    await post().expect(429);
  });
});
