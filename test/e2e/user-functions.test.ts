/**
 * User functions (`key`, rate, `cost`, `byTier`'s plan) against client input and
 * authentication: a function that throws never takes its policy off the request, and a
 * policy any of whose functions may read the user is decided after the guards that set it,
 * a route's own (`@UseGuards`) or a global one registered after the module's.
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  HttpCode,
  Inject,
  Injectable,
  Module,
  Post,
  Req,
  SetMetadata,
  UnauthorizedException,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { APP_GUARD, Reflector } from '@nestjs/core';
import type { Redis } from 'ioredis';
import {
  byTier,
  keys,
  MemoryStore,
  RateLimit,
  rateLimitContext,
  RateLimitModule,
} from '../../lib/index.js';
import { disconnect, newRedis, redisUrl } from '../harness/redis.js';
import {
  bootstrap,
  CapturingLogger,
  createApp,
  PLATFORMS,
  request,
  times,
  uniquePrefix,
  type AppHandle,
  type Platform,
} from './support/app.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

type Body = { items?: unknown[] | null };
/** What the issue's `cost: (ctx) => body.items.length` reads: a TypeError on `{ "items": null }`. */
const itemCount = (ctx: ExecutionContext): number =>
  rateLimitContext<{ body: Body }>(ctx).request!.body.items!.length;
const header = (ctx: ExecutionContext, name: string): string | undefined =>
  rateLimitContext<{ headers: Record<string, string | undefined> }>(ctx).request?.headers[name];

@Controller('orders')
class OrdersController {
  @Post()
  @HttpCode(200)
  @RateLimit('5/m', { key: keys.ip, cost: (ctx) => itemCount(ctx) })
  create() {
    return 'created';
  }

  @Post('closed')
  @HttpCode(200)
  @RateLimit('5/m', { key: keys.ip, failClosed: true, cost: (ctx) => itemCount(ctx) })
  closed() {
    return 'created';
  }

  // Fallback `pro`, so that the strictest tier (`free`: 3 a minute) is not the fallback.
  @Get('tier')
  @RateLimit(
    byTier(
      { pro: '100/m', free: '3/m', trial: '10/s' },
      (ctx) => {
        const plan = header(ctx, 'x-plan');
        if (plan === 'boom') throw new Error('plan service down');
        return plan;
      },
      { fallback: 'pro' },
    ),
    { key: keys.ip },
  )
  tier() {
    return 'tier';
  }

  @Get('rate')
  @RateLimit(
    (ctx) => {
      const rate = header(ctx, 'x-rate');
      if (rate === undefined) throw new Error('no rate');
      return rate;
    },
    { key: keys.ip },
  )
  rate() {
    return 'rate';
  }

  @Get('key')
  @RateLimit('1/m', {
    key: () => {
      throw new Error('key broke');
    },
  })
  key() {
    return 'key';
  }
}

/** What the app logged at warn or error level, besides the refusals (`rate_limit.blocked`). */
const warnings = (logger: CapturingLogger) =>
  logger.lines
    .filter((l) => l.level === 'warn' || l.level === 'error')
    .filter((l) => !l.message.startsWith('rate_limit.blocked '))
    .map((l) => l.message);

const from = (ip: string, extra: Record<string, string> = {}) => ({
  'x-forwarded-for': ip,
  ...extra,
});

describe.each(PLATFORMS)('a user function that throws on client input, on %s', (platform) => {
  const logger = new CapturingLogger();
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(platform, { trustedProxies: 1 }, [OrdersController], { logger });
  });
  afterAll(() => h?.close());

  const post = async (path: string, body: unknown, ip: string) => {
    const res = await fetch(`${h.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...from(ip) },
      body: JSON.stringify(body),
    });
    await res.arrayBuffer();
    return res;
  };

  // Issue 33, item 6: a cost function that threw left its policy out: 30 of 30 admitted.
  it('a cost function that throws charges 1: exactly 5 of 30 admitted at 5/m', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++)
      statuses.push((await post('/orders', { items: null }, '10.6.0.1')).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(statuses.slice(5)).toEqual(Array(25).fill(429));
    const logged = logger.matching('rate_limit.config_error').filter((l) => l.includes('threw'));
    expect(logged.length).toBeGreaterThanOrEqual(1);
    expect(logged.length).toBeLessThanOrEqual(3);
    expect(logged[0]).toContain('ERR_RATE_LIMIT_COST');
    expect(logged[0]).toContain('charged 1');
    // A valid body is charged what the function says.
    const valid = await post('/orders', { items: [1, 2] }, '10.6.0.2');
    expect(valid.status).toBe(200);
    expect(valid.headers.get('ratelimit')).toMatch(/^"default";r=3;t=\d+$/);
  });

  it('a fail-closed policy whose cost function throws answers 503, never admits', async () => {
    const replies = [];
    for (let i = 0; i < 30; i++)
      replies.push(await post('/orders/closed', { items: null }, '10.6.1.1'));
    expect(replies.map((r) => r.status)).toEqual(Array(30).fill(503));
    expect(replies[0]!.headers.get('retry-after')).toBe('1');
  });

  it('a byTier plan function that throws gets the strictest tier, not the fallback or none', async () => {
    const replies = await times(5, () =>
      h.get('/orders/tier', from('10.6.2.1', { 'x-plan': 'boom' })),
    );
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    expect(replies[0]!.rl['ratelimit-policy']).toBe('"default";q=3;w=60');
    expect(logger.matching('rate_limit.config_error').join('\n')).toMatch(
      /rate function of policy \\"default\\" failed \(plan service down\): limited at 3\/m, its strictest tier/,
    );
    // A plan that answers gets its tier.
    const pro = await h.get('/orders/tier', from('10.6.2.2', { 'x-plan': 'pro' }));
    expect(pro.rl['ratelimit-policy']).toBe('"default";q=100;w=60');
  });

  it('a rate function that throws is limited at the strictest rate it has answered', async () => {
    expect((await h.get('/orders/rate', from('10.6.3.1', { 'x-rate': '50/m' }))).status).toBe(200);
    expect((await h.get('/orders/rate', from('10.6.3.2', { 'x-rate': '2/m' }))).status).toBe(200);
    const failing = await times(3, () => h.get('/orders/rate', from('10.6.3.3')));
    expect(failing.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(failing[0]!.rl['ratelimit-policy']).toBe('"default";q=2;w=60');
  });

  it('a key function that throws falls back to the client address', async () => {
    expect((await h.get('/orders/key', from('10.6.4.1'))).status).toBe(200);
    expect((await h.get('/orders/key', from('10.6.4.1'))).status).toBe(429);
    expect((await h.get('/orders/key', from('10.6.4.2'))).status).toBe(200);
    expect(logger.matching('rate_limit.config_error').join('\n')).toContain('key broke');
  });
});

/** The README's tier recipe behind an API key: the accounts a key stands for. */
@Injectable()
class AccountsService {
  private readonly byKey = new Map([
    ['free-key', { id: 'acme', plan: 'free' }],
    ['pro-key', { id: 'globex', plan: 'pro' }],
  ]);
  byApiKey(key: unknown): Promise<{ id: string; plan: string } | undefined> {
    return Promise.resolve(typeof key === 'string' ? this.byKey.get(key) : undefined);
  }
}

/** The README recipe's guard, verbatim but for the type arguments. */
@Injectable()
class ApiKeyGuard implements CanActivate {
  constructor(private readonly accounts: AccountsService) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const request = rateLimitContext<{ headers: Record<string, string>; user?: unknown }>(
      ctx,
    ).request!;
    const account = await this.accounts.byApiKey(request.headers['x-api-key']);
    if (!account) throw new UnauthorizedException();
    request.user = { id: account.id, plan: account.plan };
    return true;
  }
}

@Controller('reports')
@UseGuards(ApiKeyGuard)
class ReportsController {
  @Get()
  @RateLimit(
    byTier({ free: '10/m', pro: '100/m' }, (ctx) => rateLimitContext(ctx).user?.plan, {
      fallback: 'free',
    }),
    { key: keys.header('x-api-key') },
  )
  list() {
    return [];
  }
}

const TIER_RECIPE = [
  "byTier({ free: '10/m', pro: '100/m' }, (ctx) => rateLimitContext(ctx).user?.plan, { fallback: 'free', }), { key: keys.header('x-api-key') },",
  '@UseGuards(ApiKeyGuard)',
  "const account = await this.accounts.byApiKey(request.headers['x-api-key']);",
  'request.user = { id: account.id, plan: account.plan };',
];

it('the README holds the tier recipe behind an API-key guard as this suite runs it', () => {
  const flat = readme.replace(/\s+/g, ' ');
  expect(TIER_RECIPE.filter((line) => !flat.includes(line))).toEqual([]);
});

describe.each(PLATFORMS)('the README tier recipe behind an API-key guard, on %s', (platform) => {
  const logger = new CapturingLogger();
  let h: AppHandle;
  beforeAll(async () => {
    // A clock that stands still: 100/m refills one every 600 ms, so on the real clock a loaded
    // machine that takes over 1.2 s for the 102 requests would admit 102.
    const store = new MemoryStore({ clock: () => 1_800_000_000_000, sweepIntervalMs: 0 });
    h = await createApp(platform, { store }, [ReportsController], {
      logger,
      providers: [AccountsService, ApiKeyGuard],
    });
  });
  afterAll(() => h?.close());

  // Issue 33, item 8: a policy keyed by the API key was decided before ApiKeyGuard, so the
  // plan function never saw the user: a pro key got 10 of 102.
  it('a free key gets 10 of 12 and a pro key 100 of 102, with no warning', async () => {
    const free = await times(12, () => h.get('/reports', { 'x-api-key': 'free-key' }));
    expect(free.filter((r) => r.status === 200)).toHaveLength(10);
    expect(free.slice(10).map((r) => r.status)).toEqual([429, 429]);
    expect(free[0]!.rl['ratelimit-policy']).toBe('"default";q=10;w=60');
    const pro = await times(102, () => h.get('/reports', { 'x-api-key': 'pro-key' }));
    expect(pro.filter((r) => r.status === 200)).toHaveLength(100);
    expect(pro.slice(100).map((r) => r.status)).toEqual([429, 429]);
    expect(pro[0]!.rl['ratelimit-policy']).toBe('"default";q=100;w=60');
    expect(warnings(logger)).toEqual([]);
  });

  it('a bad key is refused by the guard and counted against the address', async () => {
    const replies = await times(22, () => h.get('/reports', { 'x-api-key': 'stolen' }));
    // The address budget of refused requests: addressBurst (20), then 429 before the guard.
    expect(replies.filter((r) => r.status === 401)).toHaveLength(20);
    expect(replies.slice(20).map((r) => r.status)).toEqual([429, 429]);
  });
});

/** The Nest docs' `@Public()` (Authentication, "Enable authentication globally"). */
const IS_PUBLIC_KEY = 'isPublic';
const Public = () => SetMetadata(IS_PUBLIC_KEY, true);

/** Tokens the docs' `jwtService.verifyAsync` would accept, and their payloads. */
const TOKENS: Record<string, { sub: string; username: string }> = {
  'token-alice': { sub: 'alice', username: 'alice' },
  'token-bob': { sub: 'bob', username: 'bob' },
};

/** The Nest docs' AuthGuard, registered as APP_GUARD, with the JWT check stubbed by TOKENS. */
@Injectable()
class AuthGuard implements CanActivate {
  constructor(@Inject(Reflector) private reflector: Reflector) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const isPublic = this.reflector.getAllAndOverride<boolean>(IS_PUBLIC_KEY, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (isPublic) return true;
    const request = context.switchToHttp().getRequest<Req>();
    const token = this.extractTokenFromHeader(request);
    if (!token) throw new UnauthorizedException();
    const payload = await Promise.resolve(TOKENS[token]);
    if (!payload) throw new UnauthorizedException();
    request['user'] = payload;
    return true;
  }

  private extractTokenFromHeader(request: Req): string | undefined {
    const [type, token] = request.headers.authorization?.split(' ') ?? [];
    return type === 'Bearer' ? token : undefined;
  }
}

type Req = { headers: Record<string, string | undefined>; user?: unknown };

@Module({ providers: [{ provide: APP_GUARD, useClass: AuthGuard }] })
class AuthModule {}

const passwordChecks = { count: 0 };
@Injectable()
class PasswordGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    passwordChecks.count++;
    if (rateLimitContext<Req>(ctx).request!.headers['x-password'] !== 'right') {
      throw new UnauthorizedException();
    }
    return true;
  }
}

@Controller()
class ProfileController {
  @Get('profile')
  @RateLimit('3/m')
  getProfile(@Req() req: Req) {
    return req.user;
  }

  @Public()
  @Post('auth/login')
  @HttpCode(200)
  @UseGuards(PasswordGuard)
  @RateLimit('3/m', { key: keys.ip })
  login() {
    return 'welcome';
  }
}

type Order = 'AuthModule after' | 'AuthModule before' | 'app.useGlobalGuards';

async function docsApp(platform: Platform, order: Order, logger: CapturingLogger) {
  const prefix = uniquePrefix();
  const rateLimit = RateLimitModule.forRoot({
    redis: redisUrl(),
    prefix,
    timeoutMs: 2000,
    trustedProxies: 1,
    addressBurst: 3,
  });
  const imports =
    order === 'AuthModule before'
      ? [AuthModule, rateLimit]
      : order === 'AuthModule after'
        ? [rateLimit, AuthModule]
        : [rateLimit];
  @Module({ imports, controllers: [ProfileController], providers: [PasswordGuard] })
  class AppModule {}
  const app = await bootstrap(platform, AppModule, logger);
  if (order === 'app.useGlobalGuards') app.useGlobalGuards(new AuthGuard(app.get(Reflector)));
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  return {
    app,
    prefix,
    get: (path: string, headers: Record<string, string> = {}) => request(`${url}${path}`, headers),
    url,
  };
}

const bearer = (token: string, ip: string) => ({ authorization: `Bearer ${token}`, ...from(ip) });

describe.each(
  PLATFORMS.flatMap((platform) =>
    (['AuthModule after', 'app.useGlobalGuards', 'AuthModule before'] as Order[]).map(
      (order) => [platform, order] as const,
    ),
  ),
)("the Nest docs' global AuthGuard, on %s, %s RateLimitModule", (platform, order) => {
  const logger = new CapturingLogger();
  let redis: Redis;
  let h: Awaited<ReturnType<typeof docsApp>>;
  beforeAll(async () => {
    redis = newRedis();
    h = await docsApp(platform, order, logger);
  });
  afterAll(async () => {
    await h?.app.close();
    await disconnect(redis);
  });

  // Issue 33, item 9: imported after RateLimitModule, the AuthGuard ran after the module's
  // guard, so `keys.userOrIp` found no user: two users behind one address shared `{ip:…}`.
  it('two users behind one address each get their own full limit', async () => {
    const alice = await times(4, () => h.get('/profile', bearer('token-alice', '10.9.0.1')));
    expect(alice.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    const bob = await times(4, () => h.get('/profile', bearer('token-bob', '10.9.0.1')));
    expect(bob.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    const stored = await redis.keys(`${h.prefix}:*ProfileController.getProfile:*`);
    expect(stored.map((k) => k.slice(0, k.indexOf('}') + 1)).sort()).toEqual([
      `${h.prefix}:{user:alice}`,
      `${h.prefix}:{user:bob}`,
    ]);
  });

  if (order === 'AuthModule before') {
    it('401s are not counted: the module never sees what AuthGuard refuses first', async () => {
      const anonymous = await times(5, () => h.get('/profile', from('10.9.0.2')));
      expect(anonymous.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    });
  } else {
    it('401s are counted against the address, as behind a route guard', async () => {
      const anonymous = await times(5, () => h.get('/profile', from('10.9.0.2')));
      expect(anonymous.map((r) => r.status)).toEqual([401, 401, 401, 429, 429]);
    });
  }

  it('a login limited by address is still refused before the password check', async () => {
    passwordChecks.count = 0;
    const attempts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${h.url}/auth/login`, {
        method: 'POST',
        headers: { 'x-password': 'wrong', ...from('10.9.0.3') },
      });
      await res.arrayBuffer();
      attempts.push(res.status);
    }
    expect(attempts).toEqual([401, 401, 401, 429, 429]);
    expect(passwordChecks.count).toBe(3);
  });

  it('logs no warning', () => {
    expect(warnings(logger)).toEqual([]);
  });
});
