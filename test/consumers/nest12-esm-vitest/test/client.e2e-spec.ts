import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { RateLimitModule } from 'nest-rate-limit';
import {
  createRateLimitedFetch,
  parseRateLimitFields,
  RateLimitedError,
} from 'nest-rate-limit/client';
import { CatsModule } from './../src/cats/cats.module.js';

// The cooperative client (nest-rate-limit/client) calling this app over HTTP.
describe('nest-rate-limit/client against this app', () => {
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RateLimitModule.forRoot({ store: 'memory' }), CatsModule],
    }).compile();
    app = moduleRef.createNestApplication();
    await app.listen(0, '127.0.0.1');
    url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  });

  afterAll(async () => {
    await app?.close();
  });

  it('reads the quota the app sends, and gives up at once on a wait beyond its bound', async () => {
    const limited = createRateLimitedFetch({ maxWaitMs: 1000 });
    let last: Response | undefined;
    for (let i = 0; i < 3; i++) {
      last = await limited(`${url}/cats`);
      expect(last.status).toBe(200);
    }
    expect(parseRateLimitFields(last!.headers).tightest).toEqual({
      name: 'default',
      remaining: 0,
      resetSeconds: 60,
      limit: 3,
      windowSeconds: 60,
    });
    const error = await limited(`${url}/cats`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitedError);
    expect((error as RateLimitedError<Response>).reason).toBe('wait-too-long');
    expect((error as RateLimitedError<Response>).response.status).toBe(429);
  });
});
