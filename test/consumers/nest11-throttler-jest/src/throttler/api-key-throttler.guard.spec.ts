import { ExecutionContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ThrottlerException, ThrottlerModule } from '@nestjs/throttler';
import { CatsController } from '../cats/cats.controller';
import { ApiKeyThrottlerGuard } from './api-key-throttler.guard';

function httpContext(
  handler: (...args: any[]) => unknown,
  headers: Record<string, string> = {},
): { context: ExecutionContext; res: { header: jest.Mock } } {
  const req = { ip: '10.0.0.1', headers };
  const res = { header: jest.fn() };
  const context = {
    getType: () => 'http',
    getClass: () => CatsController,
    getHandler: () => handler,
    getArgs: () => [req, res],
    switchToHttp: () => ({ getRequest: () => req, getResponse: () => res }),
  } as unknown as ExecutionContext;
  return { context, res };
}

describe('ApiKeyThrottlerGuard', () => {
  let guard: ApiKeyThrottlerGuard;

  beforeEach(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        ThrottlerModule.forRoot([
          { name: 'short', ttl: 1000, limit: 3 },
          { name: 'long', ttl: 60000, limit: 20 },
        ]),
      ],
      providers: [ApiKeyThrottlerGuard],
    }).compile();

    guard = moduleRef.get(ApiKeyThrottlerGuard);
    await guard.onModuleInit();
  });

  it('tracks API clients by their key and the others by IP address', async () => {
    const getTracker = (req: Record<string, any>) => guard['getTracker'](req);
    await expect(
      getTracker({ ip: '10.0.0.1', headers: { 'x-api-key': 'abc' } }),
    ).resolves.toBe('key:abc');
    await expect(getTracker({ ip: '10.0.0.1', headers: {} })).resolves.toBe(
      'ip:10.0.0.1',
    );
  });

  it('applies the route override and sets the throttler headers', async () => {
    // eslint-disable-next-line @typescript-eslint/unbound-method
    const create = CatsController.prototype.create;
    const first = httpContext(create, { 'x-api-key': 'abc' });
    await expect(guard.canActivate(first.context)).resolves.toBe(true);
    expect(first.res.header).toHaveBeenCalledWith('X-RateLimit-Limit-short', 1);
    expect(first.res.header).toHaveBeenCalledWith(
      'X-RateLimit-Remaining-short',
      0,
    );
    expect(first.res.header).toHaveBeenCalledWith('X-RateLimit-Limit-long', 20);
    expect(first.res.header).toHaveBeenCalledWith(
      'X-RateLimit-Remaining-long',
      19,
    );

    const second = httpContext(create, { 'x-api-key': 'abc' });
    await expect(guard.canActivate(second.context)).rejects.toThrow(
      ThrottlerException,
    );
    expect(second.res.header).toHaveBeenCalledWith('Retry-After-short', 1);

    // Another key has a budget of its own.
    const other = httpContext(create, { 'x-api-key': 'xyz' });
    await expect(guard.canActivate(other.context)).resolves.toBe(true);
  });

  it('lets a skipped route through without headers', async () => {
    // eslint-disable-next-line @typescript-eslint/unbound-method
    const health = CatsController.prototype.health;
    const { context, res } = httpContext(health);
    for (let i = 0; i < 5; i++) {
      await expect(guard.canActivate(context)).resolves.toBe(true);
    }
    expect(res.header).not.toHaveBeenCalled();
  });
});
