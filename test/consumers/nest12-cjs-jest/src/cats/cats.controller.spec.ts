import { Test, TestingModule } from '@nestjs/testing';
import { RateLimitModule, RateLimitService } from 'nest-rate-limit';
import { CatsController } from './cats.controller';

describe('CatsController', () => {
  let moduleRef: TestingModule;
  let catsController: CatsController;

  beforeEach(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [RateLimitModule.forRoot({ store: 'memory' })],
      controllers: [CatsController],
    }).compile();

    catsController = moduleRef.get<CatsController>(CatsController);
  });

  afterEach(async () => {
    await moduleRef.close();
  });

  it('returns the cats', () => {
    expect(catsController.findAll()).toEqual(['Tom', 'Felix']);
  });

  it('reports its health', () => {
    expect(catsController.health()).toEqual({ status: 'ok' });
  });

  it('gives a RateLimitService that counts in memory: 3 of 3/m admitted, the 4th refused', async () => {
    const limits = moduleRef.get(RateLimitService);
    const policy = { name: 'default', rate: '3/m' };
    const options = { scope: 'CatsController.findAll' };

    for (const remaining of [2, 1, 0]) {
      const decision = await limits.check('ip:203.0.113.7', policy, options);
      expect(decision.allowed).toBe(true);
      expect(decision.policies[0]).toMatchObject({
        name: 'default',
        limit: 3,
        remaining,
      });
    }
    const refused = await limits.check('ip:203.0.113.7', policy, options);
    expect(refused.allowed).toBe(false);
    expect(refused.policies[0]).toMatchObject({
      name: 'default',
      limit: 3,
      remaining: 0,
    });
    expect(refused.policies[0].retryAfterMs).toBeGreaterThan(19_000);
    expect(refused.policies[0].retryAfterMs).toBeLessThanOrEqual(20_000);
  });
});
