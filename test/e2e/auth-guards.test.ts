/**
 * Per-user limits behind a route's own authentication guard (DESIGN §6, issue 13): Nest runs
 * the module's global guard before `@UseGuards(AuthGuard('jwt'))`, so the policies whose key
 * needs the user are decided after the route's guards, while IP-keyed ones still run first.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  HttpCode,
  Injectable,
  Post,
  UnauthorizedException,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import type { Redis } from 'ioredis';
import { keys, RateLimit, RateLimitGuard, rateLimitContext } from '../../lib/index.js';
import { disconnect, newRedis } from '../harness/redis.js';
import { createApp, PLATFORMS, type AppHandle } from './support/app.js';

type Req = { headers: Record<string, string | undefined>; user?: { id: string } };

/** What passport-jwt does: `Authorization: Bearer <token>` becomes `request.user`, else 401. */
@Injectable()
class JwtGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    const request = rateLimitContext<Req>(ctx).request!;
    const token = /^Bearer (\w+)$/.exec(request.headers.authorization ?? '')?.[1];
    if (!token) throw new UnauthorizedException();
    request.user = { id: token };
    return true;
  }
}

/** Authentication that lets anonymous clients through. */
@Injectable()
class OptionalJwtGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    const request = rateLimitContext<Req>(ctx).request!;
    const token = /^Bearer (\w+)$/.exec(request.headers.authorization ?? '')?.[1];
    if (token) request.user = { id: token };
    return true;
  }
}

/** What passport-local does: checks the password (counted here), 401 when wrong. */
const passwordChecks = { count: 0 };
@Injectable()
class PasswordGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    passwordChecks.count++;
    const request = rateLimitContext<Req>(ctx).request!;
    if (request.headers['x-password'] !== 'right') throw new UnauthorizedException();
    request.user = { id: 'alice' };
    return true;
  }
}

@Controller('me')
@UseGuards(JwtGuard)
class MeController {
  @Get()
  @RateLimit('2/m')
  me() {
    return 'me';
  }

  // One policy per client address, decided first, and one per user, decided after the guard.
  @Get('both')
  @RateLimit('10/m', { name: 'address', key: keys.ip })
  @RateLimit('2/m', { name: 'user' })
  both() {
    return 'both';
  }
}

@Controller('feed')
class FeedController {
  @Get()
  @UseGuards(OptionalJwtGuard)
  @RateLimit('2/m')
  feed() {
    return 'feed';
  }
}

@Controller('auth')
class AuthController {
  @Post('login')
  @HttpCode(200)
  @UseGuards(PasswordGuard)
  @RateLimit('3/m', { key: keys.ip })
  login() {
    return 'welcome';
  }

  // One budget per account, whoever guesses: a key that reads no user, decided first.
  @Post('account')
  @HttpCode(200)
  @UseGuards(PasswordGuard)
  @RateLimit('3/m', {
    key: keys.withoutUser(
      (ctx) => `acct:${rateLimitContext<Req>(ctx).request!.headers['x-account']}`,
    ),
  })
  account() {
    return 'welcome';
  }

  // The same, for guesses sent all at once.
  @Post('burst')
  @HttpCode(200)
  @UseGuards(PasswordGuard)
  @RateLimit('3/m')
  burst() {
    return 'welcome';
  }

  // The default key (the user, else the address): decided after the guard.
  @Post('guess')
  @HttpCode(200)
  @UseGuards(PasswordGuard)
  @RateLimit('3/m')
  guess() {
    return 'welcome';
  }
}

/** A route guarded twice (globally and by hand) still counts once. */
@Controller('twice')
@UseGuards(JwtGuard, RateLimitGuard)
class TwiceController {
  @Get()
  @RateLimit('2/m')
  twice() {
    return 'twice';
  }
}

const bearer = (user: string) => ({ authorization: `Bearer ${user}` });

let redis: Redis;
beforeAll(() => {
  redis = newRedis();
});
afterAll(() => disconnect(redis));

/** A per-user limit with a penalty, behind authentication (issue 22, finding 2). */
@Controller('locked')
@UseGuards(JwtGuard)
class LockedController {
  @Get()
  @RateLimit('5/m', { block: '15m' })
  locked() {
    return 'locked';
  }
}

describe.each(PLATFORMS)('policies behind a route guard, on %s', (platform) => {
  let h: AppHandle;
  beforeAll(async () => {
    // Address budgets of exactly each policy's limit (addressBurst 1), so that the numbers
    // here stay small; the default burst is the next suite's.
    h = await createApp(platform, { addressBurst: 1 }, [
      MeController,
      FeedController,
      AuthController,
      TwiceController,
      LockedController,
    ]);
  });
  afterAll(() => h?.close());
  beforeEach(() => {
    passwordChecks.count = 0;
  });

  const statuses = async (n: number, path: string, headers: Record<string, string> = {}) => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push((await h.get(path, headers)).status);
    return out;
  };

  it('two users behind one IP have separate budgets (the key needs the user)', async () => {
    expect(await statuses(3, '/me', bearer('alice'))).toEqual([200, 200, 429]);
    expect(await statuses(3, '/me', bearer('bob'))).toEqual([200, 200, 429]);
    const stored = (await redis.keys(`${h.prefix}:*MeController.me*`)).sort();
    expect(stored).toEqual([
      expect.stringMatching(new RegExp(`^${h.prefix}:\\{user:alice\\}:MeController\\.me:`)),
      expect.stringMatching(new RegExp(`^${h.prefix}:\\{user:bob\\}:MeController\\.me:`)),
    ]);
  });

  // Regression (issue 22, finding 2): with `block: '15m'`, 6 bad tokens from one address
  // answered 401 x5 then 429 with Retry-After: 900, and valid users on that address were
  // refused for 900 s: the block was copied onto the address budget everyone behind a NAT shares.
  it("a policy's block locks a user out, and never reaches the address budget", async () => {
    // The penalty on the user's own budget: the 6th request of a user is locked out 15 min.
    const user = [];
    for (let i = 0; i < 6; i++) user.push(await h.get('/locked', bearer('erin')));
    expect(user.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(Number(user[5]!.headers.get('retry-after'))).toBe(900);
    // Bad tokens from the same address: 5 per minute, then refused until the budget refills
    // (one every 12 s), not for the 15 min block.
    const guesses = [];
    for (let i = 0; i < 6; i++) guesses.push(await h.get('/locked'));
    expect(guesses.map((r) => r.status)).toEqual([401, 401, 401, 401, 401, 429]);
    const addressWait = Number(guesses[5]!.headers.get('retry-after'));
    expect(addressWait).toBeGreaterThanOrEqual(1);
    expect(addressWait).toBeLessThanOrEqual(12);
    const [addressKey] = await redis.keys(`${h.prefix}:*LockedController.locked/unauthenticated*`);
    expect(addressKey).toBeDefined();
    expect(await redis.pttl(addressKey!)).toBeLessThanOrEqual(60_000);
  });

  it('a refusal decided after the guard has Retry-After and the rate-limit headers', async () => {
    await statuses(2, '/me', bearer('carol'));
    const refused = await h.get('/me', bearer('carol'));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.rl['ratelimit-policy']).toBe('"default";q=2;w=60');
    expect(refused.rl.ratelimit).toBe(`"default";r=0;t=${refused.headers.get('retry-after')}`);
  });

  it('an anonymous client is limited by address where the guard lets it through', async () => {
    expect(await statuses(3, '/feed')).toEqual([200, 200, 429]);
    // A user there has a budget of its own.
    expect(await statuses(1, '/feed', bearer('dave'))).toEqual([200]);
    const stored = await redis.keys(`${h.prefix}:*FeedController.feed*`);
    expect(stored.map((k) => k.slice(0, k.indexOf('}') + 1)).sort()).toEqual([
      `${h.prefix}:{ip:127.0.0.1}`,
      `${h.prefix}:{user:dave}`,
    ]);
  });

  // Regression (review): requests the guard refused were not counted at all, so password
  // and token guessing under the default key went unlimited.
  it('requests the guard refuses are charged to the address, and refused once it has spent', async () => {
    const replies: number[] = [];
    for (let i = 0; i < 4; i++) {
      replies.push((await h.get('/me')).status);
    }
    expect(replies).toEqual([401, 401, 429, 429]);
    // Refused before the guard ran, with the wait: the address spent its 2 on failures.
    const refused = await h.get('/me');
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // A user's own budget is untouched by that address's failures: authentication decides
    // per user, but only once the address passes its check.
    expect((await h.get('/me', bearer('henry'))).status).toBe(429);
  });

  // Second review: the charge came after the response, so guesses in flight together all
  // passed the check (200 pipelined guesses, 200 password checks).
  it('password guesses sent all at once are limited too: 3 reach the password check', async () => {
    const guesses = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const res = await fetch(`${h.url}/auth/burst`, {
          method: 'POST',
          headers: { 'x-password': 'wrong' },
        });
        await res.arrayBuffer();
        return res.status;
      }),
    );
    expect(guesses.filter((status) => status === 401)).toHaveLength(3);
    expect(guesses.filter((status) => status === 429)).toHaveLength(17);
    expect(passwordChecks.count).toBe(3);
  });

  it('password guessing under the default key is refused after the limit, before the password check', async () => {
    const attempts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${h.url}/auth/guess`, {
        method: 'POST',
        headers: { 'x-password': 'wrong' },
      });
      attempts.push(res.status);
      await res.arrayBuffer();
    }
    expect(attempts).toEqual([401, 401, 401, 429, 429]);
    expect(passwordChecks.count).toBe(3);
  });

  // Review: a custom key was deferred like a user key, so one account's password could be
  // guessed without limit from many addresses.
  it('a per-account key marked withoutUser is decided before the password check', async () => {
    const attempt = async (account: string) => {
      const res = await fetch(`${h.url}/auth/account`, {
        method: 'POST',
        headers: { 'x-password': 'wrong', 'x-account': account },
      });
      await res.arrayBuffer();
      return res.status;
    };
    const victim = [];
    for (let i = 0; i < 5; i++) victim.push(await attempt('victim'));
    expect(victim).toEqual([401, 401, 401, 429, 429]);
    expect(passwordChecks.count).toBe(3);
    expect(await attempt('other')).toBe(401);
  });

  it('a login limited per IP is refused before any password check runs', async () => {
    const attempts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${h.url}/auth/login`, {
        method: 'POST',
        headers: { 'x-password': 'wrong' },
      });
      attempts.push(res.status);
      await res.arrayBuffer();
    }
    expect(attempts).toEqual([401, 401, 401, 429, 429]);
    expect(passwordChecks.count).toBe(3);
  });

  it('an IP policy (decided first) and a user policy (decided after) share the headers', async () => {
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await h.get('/me/both', bearer('erin')));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(replies[0]!.rl['ratelimit-policy']).toBe('"address";q=10;w=60, "user";q=2;w=60');
    expect(replies[0]!.rl.ratelimit).toMatch(/^"address";r=9;t=\d+, "user";r=1;t=\d+$/);
    // The refusal came from the user policy; the address policy spent its 3.
    expect(replies[2]!.rl.ratelimit).toMatch(/^"address";r=7;t=\d+, "user";r=0;t=\d+$/);
  });

  it('a route guarded twice (global guard and @UseGuards) counts once, per user', async () => {
    expect(await statuses(3, '/twice', bearer('frank'))).toEqual([200, 200, 429]);
    expect(await statuses(1, '/twice', bearer('grace'))).toEqual([200]);
  });
});

/**
 * An auth guard that holds every request until `expected` have reached it or been refused
 * before it: all of them are in flight to the guard at once, without a sleep.
 */
const office = {
  expected: 0,
  arrived: 0,
  refusedEarly: 0,
  open: () => {},
  gate: Promise.resolve(),
};
function expectTogether(expected: number): { refusedEarly: () => void } {
  Object.assign(office, { expected, arrived: 0, refusedEarly: 0 });
  office.gate = new Promise<void>((resolve) => (office.open = resolve));
  return {
    refusedEarly: () => {
      office.refusedEarly++;
      if (office.arrived + office.refusedEarly >= office.expected) office.open();
    },
  };
}

@Injectable()
class OfficeGuard implements CanActivate {
  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    office.arrived++;
    if (office.arrived + office.refusedEarly >= office.expected) office.open();
    await office.gate;
    return new JwtGuard().canActivate(ctx);
  }
}

@Controller('office')
@UseGuards(OfficeGuard)
class OfficeController {
  @Get()
  @RateLimit('5/m')
  office() {
    return 'office';
  }
}

describe.each(PLATFORMS)(
  'many users behind one address (the default addressBurst), on %s',
  (platform) => {
    let h: AppHandle;
    beforeAll(async () => {
      h = await createApp(platform, {}, [OfficeController]);
    });
    afterAll(() => h?.close());

    // Regression (issue 22, finding 6): 20 valid users logging in together from one address to
    // a `5/m` route answered 200 x5 and 429 x15: while they waited on the auth guard, each held
    // a unit of the address budget, which was the policy's limit (5).
    it('20 users log in together and all pass; a guesser on that address gets 20, then 429', async () => {
      const together = expectTogether(20);
      const users = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const res = await h.get('/office', bearer(`user${i}`));
          if (res.status !== 200) together.refusedEarly();
          return res.status;
        }),
      );
      expect(users).toEqual(Array(20).fill(200));

      // Bad tokens from the same address, sent together too: the burst reaches the guard, the
      // rest is refused before it, and then the policy's own rate (one every 12 s) applies.
      const guessing = expectTogether(25);
      const guesses = await Promise.all(
        Array.from({ length: 25 }, async () => {
          const res = await h.get('/office', { authorization: 'Bearer' });
          if (res.status === 429) guessing.refusedEarly();
          return res.status;
        }),
      );
      expect(guesses.filter((s) => s === 401)).toHaveLength(20);
      expect(guesses.filter((s) => s === 429)).toHaveLength(5);
      const next = await h.get('/office', bearer('late'));
      expect(next.status).toBe(429);
      const wait = Number(next.headers.get('retry-after'));
      expect(wait).toBeGreaterThanOrEqual(1);
      expect(wait).toBeLessThanOrEqual(12);
    });
  },
);
