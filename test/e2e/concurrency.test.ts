/**
 * Concurrency limits over HTTP (issue 15): `@ConcurrencyLimit` on Express and Fastify, Redis
 * and memory. Handlers wait on gates the test opens, so "in flight" is a state the test
 * holds, not a timing; slots come back after the response, so the tests wait for that.
 */
import 'reflect-metadata';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import {
  BadRequestException,
  Controller,
  Get,
  Injectable,
  UnauthorizedException,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { get } from 'node:http';
import {
  ConcurrencyLimit,
  keys,
  MemoryStore,
  RateLimit,
  RateLimitService,
  type RateLimitStore,
  SkipRateLimit,
  type PolicyInput,
} from '../../lib/index.js';
import { createApp, PLATFORMS, pollUntil, type AppHandle } from './support/app.js';

/** Requests inside the handlers, and the gate each waits on. */
const inside = { count: 0, gates: [] as (() => void)[] };
const gate = async () => {
  inside.count++;
  await new Promise<void>((resolve) => inside.gates.push(resolve));
  inside.count--;
};
const openGates = () => inside.gates.splice(0).forEach((open) => open());

/** The `late` route: its identity is known only once the client has gone. */
const late = { waiting: 0, ran: 0 };
async function afterClientLeft(ctx: ExecutionContext): Promise<string> {
  type Closing = { once(event: 'close', listener: () => void): void };
  const response = ctx.getArgByIndex<Closing & { raw?: Closing }>(1);
  late.waiting++;
  await new Promise<void>((resolve) => (response.raw ?? response).once('close', resolve));
  return 'ip:127.0.0.1';
}

@Controller('slots')
class SlotsController {
  @Get('held')
  @ConcurrencyLimit(2, { key: keys.ip })
  async held() {
    await gate();
    return 'done';
  }

  @Get('throws')
  @ConcurrencyLimit(1, { key: keys.ip })
  throws() {
    throw new BadRequestException('no');
  }

  @Get('late')
  @ConcurrencyLimit(1, { key: afterClientLeft })
  late() {
    late.ran++;
    return 'done';
  }

  @Get('stacked')
  @ConcurrencyLimit(1, { key: keys.ip })
  @RateLimit('2/m', { name: 'rate', key: keys.ip })
  async stacked() {
    await gate();
    return 'done';
  }
}

@Controller('class')
@ConcurrencyLimit(1, { key: keys.ip })
class ClassLimitedController {
  @Get('limited')
  async limited() {
    await gate();
    return 'done';
  }

  @Get('skipped')
  @SkipRateLimit()
  async skipped() {
    await gate();
    return 'done';
  }
}

/** Authentication as a route's own guard: the user comes from `x-user`. */
@Injectable()
class HeaderAuthGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    const request = ctx
      .switchToHttp()
      .getRequest<{ headers: Record<string, string | undefined>; user?: unknown }>();
    const id = request.headers['x-user'];
    if (!id) throw new UnauthorizedException();
    request.user = { id };
    return true;
  }
}

@Controller('users')
class PerUserController {
  /** Per user, so decided after the route's own guard has authenticated the request. */
  @Get('held')
  @UseGuards(HeaderAuthGuard)
  @ConcurrencyLimit(1, { key: keys.user() })
  async held() {
    await gate();
    return 'done';
  }

  @Get('shadow')
  @ConcurrencyLimit(1, { key: keys.ip, shadow: true })
  async shadow() {
    await gate();
    return 'done';
  }
}

const IP = 'ip:127.0.0.1';
const slotsOf = (route: string, concurrent: number): PolicyInput => ({
  name: 'concurrent',
  concurrent,
  scope: `SlotsController.${route}`,
});

describe.each(PLATFORMS)('concurrency limits on %s', (platform) => {
  describe.each(['redis', 'memory'] as const)('on %s', (store) => {
    let h: AppHandle;
    let service: RateLimitService;
    beforeAll(async () => {
      h = await createApp(platform, store === 'memory' ? { store: 'memory' } : {}, [
        SlotsController,
        ClassLimitedController,
        PerUserController,
      ]);
      service = h.app.get(RateLimitService);
    });
    afterEach(async () => {
      openGates();
      await pollUntil(() => Promise.resolve(inside.count === 0), 2000);
      await service.reset(IP);
    });
    afterAll(() => h.close());

    const free = async (policy: PolicyInput) =>
      (await service.peek(IP, [policy])).policies[0]!.remaining;
    const freeAgain = (policy: PolicyInput, expected: number) =>
      pollUntil(async () => (await free(policy)) === expected, 2000);
    const entered = (n: number) => pollUntil(() => Promise.resolve(inside.count === n), 2000);

    it('with 2 requests in flight the 3rd is a 429 with Retry-After: 1 and qu="concurrent-requests"; the slots come back after the responses', async () => {
      const first = [h.get('/slots/held'), h.get('/slots/held')];
      expect(await entered(2)).toBe(true);
      const third = await h.get('/slots/held');
      expect(third.status).toBe(429);
      expect(third.headers.get('retry-after')).toBe('1');
      expect(third.headers.get('ratelimit-policy')).toBe(
        '"concurrent";q=2;qu="concurrent-requests"',
      );
      expect(third.headers.get('ratelimit')).toBe('"concurrent";r=0;t=1');
      expect(await free(slotsOf('held', 2))).toBe(0);
      openGates();
      expect((await Promise.all(first)).map((r) => r.status)).toEqual([200, 200]);
      expect(await freeAgain(slotsOf('held', 2), 2)).toBe(true);
      const again = h.get('/slots/held');
      expect(await entered(1)).toBe(true);
      openGates();
      expect((await again).status).toBe(200);
    });

    it('a slot comes back after the handler throws', async () => {
      expect((await h.get('/slots/throws')).status).toBe(400);
      expect(await freeAgain(slotsOf('throws', 1), 1)).toBe(true);
      expect((await h.get('/slots/throws')).status).toBe(400);
    });

    it('a slot stays taken while the handler runs after the client aborted, and comes back when it returns', async () => {
      const request = get(`${h.url}/slots/held`, { agent: false });
      const closed = new Promise<void>((resolve) => request.on('close', resolve));
      request.on('error', () => undefined);
      expect(await entered(1)).toBe(true);
      expect(await free(slotsOf('held', 2))).toBe(1);
      request.destroy();
      await closed;
      // Still taken: the handler has not returned (its gate is closed). Before issue 22 it
      // came back within milliseconds of the abort.
      expect(await pollUntil(async () => (await free(slotsOf('held', 2))) === 2, 300)).toBe(false);
      expect(inside.count).toBe(1);
      openGates();
      expect(await freeAgain(slotsOf('held', 2), 2)).toBe(true);
    });

    it('a client gone before its request was decided gets its slot back at once, not after the lease', async () => {
      late.waiting = late.ran = 0;
      const request = get(`${h.url}/slots/late`, { agent: false });
      request.on('error', () => undefined);
      expect(await pollUntil(() => Promise.resolve(late.waiting === 1), 2000)).toBe(true);
      request.destroy();
      // The handler runs once the guard has decided, taking the slot, after the close.
      expect(await pollUntil(() => Promise.resolve(late.ran === 1), 2000)).toBe(true);
      expect(await freeAgain(slotsOf('late', 1), 1)).toBe(true);
    });

    it('stacked with a rate, all-or-nothing: a request refused for lack of a slot spends no rate', async () => {
      const rate: PolicyInput = { name: 'rate', rate: '2/m', scope: 'SlotsController.stacked' };
      const first = h.get('/slots/stacked');
      expect(await entered(1)).toBe(true);
      const refused = await h.get('/slots/stacked');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.headers.get('ratelimit-policy')).toBe(
        '"concurrent";q=1;qu="concurrent-requests", "rate";q=2;w=60',
      );
      expect((await service.peek(IP, [rate])).policies[0]!.remaining).toBe(1);
      openGates();
      const admitted = await first;
      expect(admitted.status).toBe(200);
      // The legacy headers speak of the rate, not of the slot (whose reset is its lease).
      expect(admitted.headers.get('x-ratelimit-limit')).toBe('2');
      expect(admitted.headers.get('x-ratelimit-remaining')).toBe('1');
    });

    it('per user behind a route guard: decided once authenticated, given back after the response', async () => {
      const userSlots: PolicyInput = { ...slotsOf('held', 1), scope: 'PerUserController.held' };
      const first = h.get('/users/held', { 'x-user': 'ann' });
      expect(await entered(1)).toBe(true);
      expect((await h.get('/users/held', { 'x-user': 'ann' })).status).toBe(429);
      // Another user has a slot of their own; no user is refused by the route's guard.
      const bob = h.get('/users/held', { 'x-user': 'bob' });
      expect(await entered(2)).toBe(true);
      expect((await h.get('/users/held')).status).toBe(401);
      openGates();
      expect([(await first).status, (await bob).status]).toEqual([200, 200]);
      const free = async () => (await service.peek('user:ann', [userSlots])).policies[0]!.remaining;
      expect(await pollUntil(async () => (await free()) === 1, 2000)).toBe(true);
      await service.reset('user:ann');
      await service.reset('user:bob');
    });

    it('in shadow mode a slot is taken and given back, and a would-be refusal is admitted', async () => {
      const shadow: PolicyInput = { ...slotsOf('shadow', 1), scope: 'PerUserController.shadow' };
      const first = h.get('/users/shadow');
      expect(await entered(1)).toBe(true);
      expect(await free(shadow)).toBe(0);
      const second = h.get('/users/shadow');
      expect(await entered(2)).toBe(true);
      openGates();
      expect([(await first).status, (await second).status]).toEqual([200, 200]);
      expect(await freeAgain(shadow, 1)).toBe(true);
    });

    it("a controller's @ConcurrencyLimit applies to its handlers; @SkipRateLimit() exempts one", async () => {
      const limited = h.get('/class/limited');
      expect(await entered(1)).toBe(true);
      expect((await h.get('/class/limited')).status).toBe(429);
      const skipped = [h.get('/class/skipped'), h.get('/class/skipped')];
      expect(await entered(3)).toBe(true);
      openGates();
      expect((await limited).status).toBe(200);
      expect((await Promise.all(skipped)).map((r) => r.status)).toEqual([200, 200]);
    });
  });
});

describe('@ConcurrencyLimit configuration', () => {
  it('a bad limit or lease fails when the class is defined, naming the handler', () => {
    const define = (concurrent: number, leaseMs?: number) => () => {
      class Reports {
        @ConcurrencyLimit(concurrent, { leaseMs })
        export() {}
      }
      return Reports;
    };
    expect(define(0)).toThrow(/invalid concurrent 0.*Reports\.export.*ERR_RATE_LIMIT_CONCURRENCY/s);
    expect(define(5, -1)).toThrow(/invalid leaseMs -1.*Reports\.export/s);
    expect(define(5, 1000)).not.toThrow();
  });
});

describe('a store without release', () => {
  it('fails at bootstrap, naming the route and the method to implement', async () => {
    // A store of the user's own that delegates consume and reset, and cannot release.
    const memory = new MemoryStore();
    const store: RateLimitStore = {
      consume: (policies) => memory.consume(policies),
      deleteByPrefix: (prefix) => memory.deleteByPrefix(prefix),
    };
    await expect(createApp('express', { store }, [SlotsController])).rejects.toThrow(
      'a concurrency limit needs a store that can release: implement RateLimitStore.release (in SlotsController.held) [ERR_RATE_LIMIT_STORE_UNSUPPORTED]',
    );
    await memory.close();
  });
});

@Controller('account')
class AccountController {
  /** Per user behind the route's own guard: the address budget spent first is refunded. */
  @Get('me')
  @UseGuards(HeaderAuthGuard)
  @RateLimit('5/m', { key: keys.user() })
  me() {
    return 'me';
  }

  @Get('login')
  @RateLimit('3/m', { key: keys.ip, count: 'failed' })
  login() {
    return 'in';
  }
}

describe('a store without refund', () => {
  const memory = new MemoryStore();
  const store: RateLimitStore = {
    consume: (policies) => memory.consume(policies),
    deleteByPrefix: (prefix) => memory.deleteByPrefix(prefix),
    release: (leases) => memory.release(leases),
  };
  afterAll(() => memory.close());

  it("fails at bootstrap for a per-user policy behind a route's guard, whose address budget is refunded", async () => {
    await expect(createApp('express', { store }, [AccountController])).rejects.toThrow(
      'count by outcome needs a store that can refund: implement RateLimitStore.refund (in AccountController.me) [ERR_RATE_LIMIT_STORE_UNSUPPORTED]',
    );
  });

  it('boots in shadow mode, where count never refunds', async () => {
    const h = await createApp('express', { store, mode: 'shadow' }, [AccountController]);
    try {
      expect((await h.get('/account/login')).status).toBe(200);
    } finally {
      await h.close();
    }
  });
});
