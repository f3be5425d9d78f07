/**
 * Inputs the Nest layer once mishandled (inherited handlers, odd controller names, functions
 * that throw or answer bad values, forwarded addresses with ports), each with the input that
 * showed the bug, on Express and Fastify.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Injectable,
  UnauthorizedException,
  UseGuards,
  type CanActivate,
} from '@nestjs/common';
import { keys, RateLimit, SkipRateLimit } from '../../lib/index.js';
import { CapturingLogger, createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

class Base {
  @Get('list')
  list() {
    return 'list';
  }
}

@Controller('a')
@RateLimit('2/m', { name: 'cls' })
class AController extends Base {}

@Controller('b')
@RateLimit('100/m', { name: 'cls' })
class BController extends Base {}

@RateLimit('1/m', { name: 'burst' })
class LimitedBase {}

@Controller('sub')
@RateLimit('100/d', { name: 'daily' })
class SubController extends LimitedBase {
  @Get()
  get() {
    return 'sub';
  }
}

@Controller('skips')
@RateLimit('1/m', { name: 'x' })
@RateLimit('1/m', { name: 'y' })
@RateLimit('1/m', { name: 'z' })
class SkipsController {
  @Get()
  @SkipRateLimit('x')
  @SkipRateLimit('y')
  skips() {
    return 'skips';
  }
}

@Controller('odd')
class Odd$Controller {
  @Get()
  @RateLimit('2/m')
  get() {
    return 'odd';
  }
}

@Injectable()
class DenyAll implements CanActivate {
  canActivate(): boolean {
    throw new UnauthorizedException();
  }
}

@Controller('r')
class RequestTimeController {
  @Get('cost')
  @RateLimit('2/m', { name: 'static' })
  @RateLimit('100/m', {
    name: 'dynamic',
    cost: (ctx) => Number(ctx.switchToHttp().getRequest<{ query: { n?: string } }>().query.n),
  })
  cost() {
    return 'cost';
  }

  @Get('closed-cost')
  @RateLimit('5/m', {
    failClosed: true,
    cost: (ctx) => Number(ctx.switchToHttp().getRequest<{ query: { n?: string } }>().query.n),
  })
  closedCost() {
    return 'closed-cost';
  }

  @Get('rate')
  @RateLimit('2/m', { name: 'static' })
  @RateLimit(
    () => {
      throw new Error('plan service down');
    },
    { name: 'plan' },
  )
  rate() {
    return 'rate';
  }

  @Get('null-key')
  @RateLimit('1/m', { key: () => null as unknown as string })
  nullKey() {
    return 'null-key';
  }

  @Get('compose')
  @RateLimit('1/m', { key: keys.compose(keys.user(), keys.header('x-api-key')) })
  compose() {
    return 'compose';
  }

  @Get('half')
  @RateLimit('10/500ms')
  half() {
    return 'half';
  }

  // Keyed by address, so decided before the route's own guard (a policy keyed by the user
  // waits for it: test/e2e/auth-guards.test.ts).
  @Get('auth')
  @RateLimit('5/m', { key: keys.ip })
  @UseGuards(DenyAll)
  auth() {
    return 'never';
  }
}

describe.each(PLATFORMS)('inputs the Nest layer once mishandled, on %s', (platform) => {
  const logger = new CapturingLogger();
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(
      platform,
      {
        trustedProxies: 1,
        skip: (ctx) => {
          if (
            ctx.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-boom']
          ) {
            throw new Error('skip broke');
          }
          return false;
        },
        errorMessage: () => {
          throw new Error('message broke');
        },
      },
      [
        AController,
        BController,
        SubController,
        Odd$Controller,
        RequestTimeController,
        SkipsController,
      ],
      { logger },
    );
  });
  afterAll(() => h?.close());

  const from = (ip: string, extra: Record<string, string> = {}) => ({
    'x-forwarded-for': ip,
    ...extra,
  });

  it('an inherited handler keeps each controller its own rules and budget', async () => {
    const a = await times(3, () => h.get('/a/list', from('10.1.0.1')));
    expect(a.map((r) => r.status)).toEqual([200, 200, 429]);
    const b = await h.get('/b/list', from('10.1.0.1'));
    expect(b.status).toBe(200);
    expect(b.headers.get('ratelimit-policy')).toBe('"cls";q=100;w=60');
  });

  it("a subclass adds to its base class's policies", async () => {
    const r = await h.get('/sub', from('10.1.0.2'));
    expect(r.headers.get('ratelimit-policy')).toBe('"burst";q=1;w=60, "daily";q=100;w=86400');
    expect((await h.get('/sub', from('10.1.0.2'))).status).toBe(429);
  });

  it('a controller name with characters no key may hold is still limited', async () => {
    const replies = await times(3, () => h.get('/odd', from('10.1.0.3')));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
  });

  // Issue 25: a bad value used to leave the policy out, so `first: -11` in
  // `Math.ceil(first / 10)` took the limit off the request. It is charged instead: 1 for NaN or
  // a negative number (never less than a plain call), a fraction rounded up.
  it.each([
    ['abc', 1, 1],
    ['-5', 2, 1],
    ['1.5', 3, 2],
  ])('a cost function given ?n=%p charges its policy, logged', async (n, i, charged) => {
    const ip = `10.2.0.${i}`;
    const replies = await times(2, () => h.get(`/r/cost?n=${n}`, from(ip)));
    expect(replies.map((r) => r.status)).toEqual([200, 200]);
    expect(replies[0]!.headers.get('ratelimit')).toMatch(
      new RegExp(`^"static";r=1;t=30, "dynamic";r=${100 - charged};t=\\d+$`),
    );
    // Logged at most once per 10 s per route: the first of these three cases writes it.
    expect(logger.matching('rate_limit.config_error').join('\n')).toMatch(
      /returned .*: charged \d/,
    );
    const valid = await h.get('/r/cost?n=1', from(ip));
    expect(valid.status).toBe(429);
    expect(valid.headers.get('ratelimit')).toMatch(
      new RegExp(`^"static";r=0;t=\\d+, "dynamic";r=${100 - 2 * charged};t=\\d+$`),
    );
  });

  it('a fail-closed policy whose cost function answers a bad value charges 1, not a 503', async () => {
    const r = await h.get('/r/closed-cost?n=abc', from('10.2.1.1'));
    expect(r.status).toBe(200);
    expect(r.headers.get('ratelimit')).toBe('"default";r=4;t=12');
  });

  // Issue 33, item 6: it used to leave its own policy out, so whoever made it throw went
  // unlimited by that policy. With no rate ever answered there is none to fall back on.
  it('a rate function that has never answered refuses with 503, never leaves its policy out', async () => {
    const replies = await times(3, () => h.get('/r/rate', from('10.3.0.1')));
    expect(replies.map((r) => r.status)).toEqual([503, 503, 503]);
    expect(replies[0]!.headers.get('retry-after')).toBe('1');
  });

  it('a key function returning null falls back to the client IP, not one shared bucket', async () => {
    expect((await h.get('/r/null-key', from('10.4.0.1'))).status).toBe(200);
    expect((await h.get('/r/null-key', from('10.4.0.2'))).status).toBe(200);
    expect((await h.get('/r/null-key', from('10.4.0.1'))).status).toBe(429);
  });

  it('keys.compose with every part absent falls back to the client IP', async () => {
    expect((await h.get('/r/compose', from('10.5.0.1'))).status).toBe(200);
    expect((await h.get('/r/compose', from('10.5.0.2'))).status).toBe(200);
  });

  it('X-Forwarded-For entries with a port are distinct clients', async () => {
    expect((await h.get('/r/compose', from('1.2.3.4:5678'))).status).toBe(200);
    expect((await h.get('/r/compose', from('5.6.7.8:1111'))).status).toBe(200);
    expect((await h.get('/r/compose', from('[2001:db8::1]:443'))).status).toBe(200);
    expect((await h.get('/r/compose', from('1.2.3.4:9999'))).status).toBe(429);
  });

  it('stacked @SkipRateLimit add up', async () => {
    const r = await h.get('/skips', from('10.6.0.1'));
    expect(r.headers.get('ratelimit-policy')).toBe('"z";q=1;w=60');
  });

  it('a period that is not whole seconds goes without w', async () => {
    const r = await h.get('/r/half', from('10.7.0.1'));
    expect(r.headers.get('ratelimit-policy')).toBe('"default";q=10');
  });

  it('a request a later guard refuses still carries the rate-limit headers', async () => {
    const r = await h.get('/r/auth', from('10.8.0.1'));
    expect(r.status).toBe(401);
    expect(r.headers.get('x-ratelimit-remaining')).toBe('4');
  });

  it('a skip or errorMessage that throws never makes a 500', async () => {
    const skipped = await h.get('/r/half', from('10.9.0.1', { 'x-boom': '1' }));
    expect(skipped.status).toBe(200);
    expect(skipped.headers.get('ratelimit-policy')).toBe('"default";q=10');
    await times(2, () => h.get('/a/list', from('10.9.0.2')));
    const refused = await h.get('/a/list', from('10.9.0.2'));
    expect(refused.status).toBe(429);
    expect((refused.body as { message: string }).message).toMatch(/Too many requests/);
  });
});

@Controller('asked')
class AskedController {
  @Get()
  asked() {
    return 'asked';
  }
}

describe('an async skip', () => {
  let asked = 0;
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(
      'express',
      {
        store: 'memory',
        default: '3/m',
        skip: () => {
          asked++;
          return Promise.resolve(false);
        },
      },
      [AskedController],
    );
  });
  afterAll(() => h.close());

  it('is asked once per request', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await h.get('/asked')).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(asked).toBe(4);
  });
});
