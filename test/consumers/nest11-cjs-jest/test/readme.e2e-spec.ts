// test/cats.e2e-spec.ts (Jest or Vitest)
import { Test } from '@nestjs/testing';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimitModule, RateLimitService } from 'nest-rate-limit';
import { CatsController } from '../src/cats/cats.controller'; // '.js' at the end in an ESM project

describe('cats', () => {
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RateLimitModule.forRoot({ store: 'memory' })],
      controllers: [CatsController], // @RateLimit('3/m') on the controller
    }).compile();
    app = moduleRef.createNestApplication();
    await app.init();
  });
  afterAll(() => app.close());

  // Limits outlive a test when the app does: forget what this client spent.
  afterEach(() => app.get(RateLimitService).reset('ip:127.0.0.1'));

  it('refuses the 4th request in a minute', async () => {
    for (let i = 0; i < 3; i++) await request(app.getHttpServer()).get('/cats').expect(200);
    const res = await request(app.getHttpServer()).get('/cats').expect(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(res.headers['ratelimit-policy']).toBe('"default";q=3;w=60');
  });
});
