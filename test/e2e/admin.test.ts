/**
 * The admin endpoints (issue 7): RateLimitAdminModule mounted behind an auth guard, end to
 * end on both platforms, on the shared Redis.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Injectable,
  Module,
  UnauthorizedException,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import type { Redis } from 'ioredis';
import {
  ConcurrencyLimit,
  keys,
  MemoryStore,
  RateLimit,
  RateLimitAdminModule,
  RateLimitModule,
  SkipRateLimit,
  type RateLimitStore,
} from '../../lib/index.js';
import { controlKey } from '../../lib/core/model/store-keys.js';
import { disconnect, newRedis, redisUrl } from '../harness/redis.js';
import {
  bootstrap,
  CapturingLogger,
  PLATFORMS,
  uniquePrefix,
  type Platform,
} from './support/app.js';

@Injectable()
class TokenGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    const request = ctx
      .switchToHttp()
      .getRequest<{ headers: Record<string, string | undefined>; user?: unknown }>();
    if (request.headers.authorization !== 'Bearer operator') throw new UnauthorizedException();
    // As an authentication guard would: the operator becomes the request's user.
    request.user = { id: 'alice' };
    return true;
  }
}

@Controller('items')
class ItemsController {
  @Get()
  @RateLimit('3/m')
  list() {
    return ['a'];
  }

  @Get('held')
  @SkipRateLimit('default')
  @ConcurrencyLimit(1, { key: keys.ip, leaseMs: 60_000 })
  async held() {
    await new Promise<void>((resolve) => gates.push(resolve));
    return 'done';
  }

  @Get('login')
  @SkipRateLimit('default')
  @RateLimit('1/m', { name: 'login', key: keys.ip, block: '15m' })
  login() {
    return 'ok';
  }
}

/** The requests waiting in `held`, each released by calling its gate. */
const gates: (() => void)[] = [];

const AUTH = { authorization: 'Bearer operator' };

interface Json {
  status: number;
  body: Record<string, unknown>;
}

/** Boots `module` on `platform`, listening on a free port of 127.0.0.1. */
async function listening(
  platform: Platform,
  module: new () => unknown,
  logs: CapturingLogger,
): Promise<{ url: string; close: () => Promise<void> }> {
  const app = await bootstrap(platform, module, logs);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  return { url, close: () => app.close() };
}

let redis: Redis;
beforeAll(() => {
  redis = newRedis();
});
afterAll(() => disconnect(redis));

describe.each(PLATFORMS)('admin endpoints on %s', (platform: Platform) => {
  const logs = new CapturingLogger();
  const prefix = uniquePrefix();
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    @Module({
      imports: [
        // A tiny default on every route: the admin endpoints must not be limited by it.
        RateLimitModule.forRoot({ redis: redisUrl(), prefix, default: '1/h', timeoutMs: 2000 }),
        RateLimitAdminModule.forRoot({ path: 'ops/rate-limit', guards: [TokenGuard] }),
      ],
      controllers: [ItemsController],
    })
    class AdminApp {}
    ({ url, close } = await listening(platform, AdminApp, logs));
  });
  afterAll(() => close?.());
  beforeEach(() => logs.clear());

  async function call(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = AUTH,
  ): Promise<Json> {
    const response = await fetch(`${url}/ops/rate-limit${path}`, {
      method,
      headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return {
      status: response.status,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
    };
  }

  it("every endpoint answers 401 without the guard's credentials", async () => {
    const id = encodeURIComponent('ip:203.0.113.7');
    const calls: [string, string, unknown?][] = [
      ['GET', `/${id}`],
      ['DELETE', `/${id}`],
      ['GET', `/${id}/overrides`],
      ['PUT', `/${id}/overrides`, { scope: '*', rate: '5/m', ttlMs: 1000, reason: 'x' }],
      ['DELETE', `/${id}/overrides?scope=*`],
      ['PUT', `/${id}/exemption`, { ttlMs: 1000, reason: 'x' }],
      ['DELETE', `/${id}/exemption`],
    ];
    for (const [method, path, body] of calls) {
      expect([method, path, (await call(method, path, body, {})).status]).toEqual([
        method,
        path,
        401,
      ]);
    }
    expect(await redis.exists(controlKey(prefix, 'ip:203.0.113.7'))).toBe(0);
  });

  it("inspect shows a route's known policy, reset admits the next request", async () => {
    const fetchItems = () => fetch(`${url}/items`).then((r) => r.status);
    const statuses = [
      await fetchItems(),
      await fetchItems(),
      await fetchItems(),
      await fetchItems(),
    ];
    expect(statuses).toEqual([200, 200, 200, 429]);
    const identity = encodeURIComponent('ip:127.0.0.1');
    const inspected = await call('GET', `/${identity}`);
    expect(inspected.status).toBe(200);
    const policies = inspected.body.policies as Record<string, unknown>[];
    expect(policies.map((p) => [p.scope, p.policy, p.algorithm, p.limit, p.remaining])).toEqual([
      ['ItemsController.list', 'default', 'token-bucket', 3, 0],
    ]);
    expect(policies[0]!.key).toBe(`${prefix}:{ip:127.0.0.1}:ItemsController.list::tb`);
    expect(await call('DELETE', `/${identity}?scope=ItemsController.list`)).toEqual({
      status: 200,
      body: { deleted: 1 },
    });
    expect(await fetchItems()).toBe(200);
    expect((await call('DELETE', `/${identity}`)).body).toEqual({ deleted: 1 });
  });

  it('inspect shows slots held (with their lease expiries) and blocks (with their end); reset clears both', async () => {
    const identity = encodeURIComponent('ip:127.0.0.1');
    await call('DELETE', `/${identity}`);
    const held = fetch(`${url}/items/held`);
    for (let i = 0; i < 100 && gates.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(gates).toHaveLength(1);
    expect((await fetch(`${url}/items/held`)).status).toBe(429);
    expect((await fetch(`${url}/items/login`)).status).toBe(200);
    expect((await fetch(`${url}/items/login`)).status).toBe(429);
    const before = Date.now();
    type Entry = Record<string, unknown> & {
      state: { held?: number; leaseExpiriesMs?: number[] };
      blockedMs?: number;
      blockedUntilMs?: number;
    };
    const policies = (await call('GET', `/${identity}`)).body.policies as Entry[];
    const slots = policies.find((p) => p.algorithm === 'concurrency')!;
    expect(slots).toMatchObject({
      scope: 'ItemsController.held',
      policy: 'concurrent',
      limit: 1,
      remaining: 0,
      state: { held: 1 },
    });
    expect(slots.state.leaseExpiriesMs).toHaveLength(1);
    expect(slots.state.leaseExpiriesMs![0]).toBeGreaterThan(before + 50_000);
    const login = policies.find((p) => p.policy === 'login')!;
    expect(login.blockedMs).toBeGreaterThan(14 * 60_000);
    expect(login.blockedUntilMs).toBeGreaterThan(before + 14 * 60_000);
    expect((await call('DELETE', `/${identity}`)).status).toBe(200);
    expect((await call('GET', `/${identity}`)).body.policies).toEqual([]);
    expect((await fetch(`${url}/items/login`)).status).toBe(200);
    // The slot came back with the reset, while its request is still in flight.
    const second = fetch(`${url}/items/held`);
    for (let i = 0; i < 100 && gates.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(gates).toHaveLength(2);
    gates.splice(0).forEach((open) => open());
    expect([(await held).status, (await second).status]).toEqual([200, 200]);
    await call('DELETE', `/${identity}`);
  });

  it('overrides and the exemption are written, listed, removed and audited', async () => {
    const identity = 'user:ops-1';
    const path = `/${encodeURIComponent(identity)}`;
    const set = await call('PUT', `${path}/overrides`, {
      scope: 'ItemsController.list',
      policy: 'default',
      rate: '100/m',
      ttlMs: 60_000,
      reason: 'partner import',
      burst: 150,
    });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({
      overrides: [
        {
          scope: 'ItemsController.list',
          policy: 'default',
          limit: 100,
          periodMs: 60_000,
          burst: 150,
          expiresInMs: expect.any(Number),
          reason: 'partner import',
        },
      ],
    });
    const expiresInMs = (set.body.overrides as { expiresInMs: number }[])[0]!.expiresInMs;
    expect(expiresInMs).toBeGreaterThan(59_000);
    expect(expiresInMs).toBeLessThanOrEqual(60_000);
    const hash = await redis.hgetall(controlKey(prefix, identity));
    expect(hash['o:ItemsController.list:default']).toMatch(/^\d{13}:100:60000:150$/);
    expect(hash['r:o:ItemsController.list:default']).toBe('partner import');

    expect(
      (await call('PUT', `${path}/exemption`, { ttlMs: 30_000, reason: 'incident 7' })).status,
    ).toBe(200);
    const listed = await call('GET', `${path}/overrides`);
    expect(listed.body.exemption).toEqual({
      expiresInMs: expect.any(Number),
      reason: 'incident 7',
    });
    expect(
      await call('DELETE', `${path}/overrides?scope=ItemsController.list&policy=default`),
    ).toEqual({
      status: 200,
      body: { removed: true },
    });
    expect(await call('DELETE', `${path}/exemption`)).toEqual({
      status: 200,
      body: { removed: true },
    });
    expect((await call('GET', `${path}/overrides`)).body).toEqual({ overrides: [] });

    const events = logs.lines
      .map((l) => l.message)
      .filter((m) => m.startsWith('rate_limit.'))
      .map((m) => m.split(' ')[0]);
    expect(events).toEqual([
      'rate_limit.override_set',
      'rate_limit.exemption_set',
      'rate_limit.override_removed',
      'rate_limit.exemption_removed',
    ]);
    // Each change names who made it: the operator the guard authenticated.
    const actors = logs.lines
      .map((l) => l.message)
      .filter((m) => m.startsWith('rate_limit.'))
      .map((m) => (JSON.parse(m.slice(m.indexOf(' ') + 1)) as { actor?: string }).actor);
    expect(actors).toEqual(['user:alice', 'user:alice', 'user:alice', 'user:alice']);
    expect(logs.lines.some((l) => l.message.includes(identity))).toBe(false);
  });

  it('bad input answers 400 with a clear message, never 500', async () => {
    const path = `/${encodeURIComponent('user:ops-2')}`;
    const good = { scope: '*', rate: '5/m', ttlMs: 1000, reason: 'ok' };
    const cases: [string, string, unknown, RegExp][] = [
      ['PUT', `${path}/overrides`, { ...good, rate: 'lots' }, /invalid rate/],
      ['PUT', `${path}/overrides`, { ...good, rate: 5 }, /rate/],
      ['PUT', `${path}/overrides`, { ...good, scope: undefined }, /scope is required/],
      ['PUT', `${path}/overrides`, { ...good, scope: 'a b' }, /invalid scope/],
      ['PUT', `${path}/overrides`, { ...good, policy: 'x:y' }, /invalid policy name/],
      ['PUT', `${path}/overrides`, { ...good, ttlMs: -5 }, /invalid ttlMs/],
      ['PUT', `${path}/overrides`, { ...good, ttlMs: '1000' }, /invalid ttlMs/],
      ['PUT', `${path}/overrides`, { ...good, reason: '' }, /invalid reason/],
      ['PUT', `${path}/overrides`, { ...good, burst: 'many' }, /invalid burst/],
      ['PUT', `${path}/overrides`, [good], /JSON object/],
      ['PUT', `${path}/exemption`, { ttlMs: 2 ** 31, reason: 'x' }, /invalid ttlMs/],
      ['PUT', `${path}/exemption`, { ttlMs: 1000 }, /invalid reason/],
      ['DELETE', `${path}/overrides`, undefined, /scope is required/],
      ['DELETE', `${path}/overrides?scope=*&policy=a%20b`, undefined, /invalid policy name/],
      ['GET', `${path}?scope=no%20spaces`, undefined, /invalid scope/],
      ['DELETE', `${path}?scope=a&scope=b`, undefined, /given once/],
    ];
    for (const [method, p, body, message] of cases) {
      const reply = await call(method, p, body);
      expect([method, p, reply.status]).toEqual([method, p, 400]);
      expect(String(reply.body.message)).toMatch(message);
      // The caller gets the detail; the link to the error reference is for the server's logs.
      expect(String(reply.body.message)).not.toContain('docs/reference/errors.md');
    }
    expect(await redis.exists(controlKey(prefix, 'user:ops-2'))).toBe(0);
  });

  it('the admin endpoints are not rate limited', async () => {
    // The module default is 1/h per client: a limited endpoint would answer 429 from the second call.
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await call('GET', '/someone')).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
  });
});

describe.each(PLATFORMS)('admin endpoints over a store of your own on %s', (platform) => {
  const memory = new MemoryStore();
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    // A store with neither `inspect` nor `control` (ERR_RATE_LIMIT_STORE_UNSUPPORTED); the
    // endpoints' own limit on failed authentications needs its `refund`.
    const store: RateLimitStore = {
      consume: (policies) => memory.consume(policies),
      refund: (refunds) => memory.refund(refunds),
      deleteByPrefix: (prefix) => memory.deleteByPrefix(prefix),
    };
    @Module({
      imports: [
        RateLimitModule.forRoot({ store, default: '100/h' }),
        RateLimitAdminModule.forRoot({ guards: [TokenGuard] }),
      ],
    })
    class OwnStoreApp {}
    ({ url, close } = await listening(platform, OwnStoreApp, new CapturingLogger()));
  });
  afterAll(async () => {
    await close?.();
    await memory.close();
  });

  it('what the store cannot do answers 501 with the detail, not 400', async () => {
    const replies = await Promise.all(
      [
        ['GET', '/user%3A1'],
        ['PUT', '/user%3A1/exemption', { ttlMs: 1000, reason: 'r' }],
      ].map(async ([method, path, body]) => {
        const response = await fetch(`${url}/rate-limit${path as string}`, {
          method: method as string,
          headers: { ...AUTH, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return [response.status, ((await response.json()) as { message: string }).message];
      }),
    );
    expect(replies).toEqual([
      [501, 'this rate-limit store cannot inspect: implement RateLimitStore.inspect'],
      [
        501,
        'this rate-limit store keeps no overrides or exemptions: implement RateLimitStore.control',
      ],
    ]);
  });
});

describe('RateLimitAdminModule.forRoot', () => {
  it('refuses to mount without guards', () => {
    expect(() => RateLimitAdminModule.forRoot({} as never)).toThrow(
      expect.objectContaining({
        code: 'ERR_RATE_LIMIT_ADMIN_OPTION',
        message: expect.stringMatching(/^invalid guards undefined/),
      }),
    );
    expect(() => RateLimitAdminModule.forRoot({ guards: [TokenGuard], path: 'a b' })).toThrow(
      expect.objectContaining({
        code: 'ERR_RATE_LIMIT_ADMIN_OPTION',
        message: expect.stringMatching(/^invalid path "a b"/),
      }),
    );
    expect(RateLimitAdminModule.forRoot({ guards: [] }).controllers).toHaveLength(1);
  });
});

// Regression (issue 22, finding 10): the endpoints were exempt from every limit, so an
// operator token could be guessed without limit (500 wrong tokens: 401 x500).
describe.each(PLATFORMS)('failed authentications at the admin endpoints on %s', (platform) => {
  const prefix = uniquePrefix();
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    @Module({
      imports: [
        RateLimitModule.forRoot({ redis: redisUrl(), prefix, timeoutMs: 2000 }),
        RateLimitAdminModule.forRoot({
          path: 'ops/rate-limit',
          guards: [TokenGuard],
          failedAuthentications: '5/m',
        }),
      ],
    })
    class GuardedAdminApp {}
    ({ url, close } = await listening(platform, GuardedAdminApp, new CapturingLogger()));
  });
  afterAll(() => close?.());

  const inspect = (identity: string, headers: Record<string, string>) =>
    fetch(`${url}/ops/rate-limit/${encodeURIComponent(identity)}`, { headers });

  it('an operator spends nothing; the 6th wrong token within a minute is refused with 429', async () => {
    const operator = [];
    for (let i = 0; i < 8; i++) operator.push((await inspect('ip:203.0.113.7', AUTH)).status);
    expect(operator).toEqual([200, 200, 200, 200, 200, 200, 200, 200]);
    const guesses = [];
    for (let i = 0; i < 6; i++) {
      guesses.push(await inspect('ip:203.0.113.7', { authorization: `Bearer guess${i}` }));
    }
    expect(guesses.map((r) => r.status)).toEqual([401, 401, 401, 401, 401, 429]);
    const wait = Number(guesses[5]!.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(12);
    // The wait is not in the body (exposeDetails: false), and no rate-limit headers are sent.
    expect(await guesses[5]!.json()).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: 'Too many requests',
    });
    expect(guesses[0]!.headers.get('x-ratelimit-limit')).toBeNull();
    // The budget has an identity of its own, apart from the address's `ip:` budgets.
    expect(await redis.keys(`${prefix}:*`)).toEqual([
      `${prefix}:{admin-auth:ip:127.0.0.1}:rate-limit-admin:failed-authentication:tb`,
    ]);
  });
});
