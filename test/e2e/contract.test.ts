/**
 * The HTTP contract of DESIGN §7 on real apps: 200s and the 429 with their headers and body,
 * cost, and stacked policies (issue 3, acceptance points 1 and 2).
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { RateLimit, RateLimitService } from '../../lib/index.js';
import { createApp, parseRateLimit, PLATFORMS, times, type AppHandle } from './support/app.js';

@Controller('contract')
class ContractController {
  @Get('five')
  @RateLimit('5/m')
  five() {
    return { ok: true };
  }

  @Get('costly')
  @RateLimit('60/m', { cost: 10 })
  costly() {
    return { ok: true };
  }
}

// Burst in a fixed window so that a slow machine cannot refill it between requests.
@Controller('stacked')
@RateLimit('3/s', { name: 'burst', algorithm: 'fixed-window' })
class StackedController {
  @Get('class-and-handler')
  @RateLimit('100/d', { name: 'daily' })
  classAndHandler() {
    return { ok: true };
  }
}

@Controller('stacked-handler')
class StackedOnHandlerController {
  @Get()
  @RateLimit('3/s', { name: 'burst', algorithm: 'fixed-window' })
  @RateLimit('100/d', { name: 'daily' })
  both() {
    return { ok: true };
  }
}

/**
 * The members of a structured-field list, sorted. The order of stacked policies is not
 * pinned down by DESIGN §7: two decorators on one handler list in application order
 * (bottom-up), i.e. `"daily", "burst"` for `@RateLimit(burst) @RateLimit(daily)`.
 */
function members(header: string | undefined): string[] {
  return (header ?? '').split(', ').sort();
}

describe.each(PLATFORMS)('HTTP contract on %s', (platform) => {
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(
      platform,
      {},
      [ContractController, StackedController, StackedOnHandlerController],
      { userFromHeader: true },
    );
  });
  afterAll(() => h?.close());

  it("@RateLimit('5/m') admits 5 with decreasing headers, then answers 429 with the full contract", async () => {
    const user = { 'x-user': 'five' };
    const replies = await times(6, () => h.get('/contract/five', user));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);

    replies.slice(0, 5).forEach((reply, i) => {
      const remaining = 4 - i;
      const spent = 5 - remaining;
      // Token bucket, 5 per 60 s: one token back every 12 s, full again after spent × 12 s.
      const reset = String(spent * 12);
      expect(reply.rl).toEqual({
        'x-ratelimit-limit': '5',
        'x-ratelimit-remaining': String(remaining),
        'x-ratelimit-reset': reset,
        ratelimit: `"default";r=${remaining};t=${reset}`,
        'ratelimit-policy': '"default";q=5;w=60',
      });
    });

    const denied = replies[5]!;
    const retryAfter = Number(denied.headers.get('retry-after'));
    expect(denied.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(retryAfter).toBe(12); // one token, at 5 per minute
    expect(denied.body).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: expect.any(String),
      retryAfter,
    });
    expect(denied.rl).toEqual({
      'x-ratelimit-limit': '5',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(retryAfter),
      ratelimit: `"default";r=0;t=${retryAfter}`,
      'ratelimit-policy': '"default";q=5;w=60',
    });
  });

  it('cost: 10 under 60/m admits exactly 6 requests', async () => {
    const user = { 'x-user': 'costly' };
    const replies = await times(7, () => h.get('/contract/costly', user));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200, 429]);
    expect(replies.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual([
      '50',
      '40',
      '30',
      '20',
      '10',
      '0',
      '0',
    ]);
  });

  describe.each([
    [
      'burst on the class, daily on the handler',
      '/stacked/class-and-handler',
      'StackedController.classAndHandler',
    ],
    ['both on the handler', '/stacked-handler', 'StackedOnHandlerController.both'],
  ])('stacked burst (3/s) + daily (100/d), %s', (_label, path, scope) => {
    it('lists both policies in RateLimit and RateLimit-Policy', async () => {
      const reply = await h.get(path, { 'x-user': `list-${scope}` });
      expect(reply.status).toBe(200);
      expect(members(reply.rl['ratelimit-policy'])).toEqual([
        '"burst";q=3;w=1',
        '"daily";q=100;w=86400',
      ]);
      expect(parseRateLimit(reply.rl.ratelimit ?? null)).toEqual({
        burst: { r: 2, t: 1 },
        daily: { r: 99, t: expect.any(Number) },
      });
    });

    it('a denial by burst consumes nothing of daily', async () => {
      const id = `deny-${scope}`;
      const replies = await times(5, () => h.get(path, { 'x-user': id }));
      expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
      expect(replies.map((r) => parseRateLimit(r.headers.get('ratelimit')).burst?.r)).toEqual([
        2, 1, 0, 0, 0,
      ]);
      // daily is spent by the three admitted requests only.
      expect(replies.map((r) => parseRateLimit(r.headers.get('ratelimit')).daily?.r)).toEqual([
        99, 98, 97, 97, 97,
      ]);
      // The 429 shows burst exhausted until its Retry-After (a 1 s fixed window).
      expect(replies[3]!.headers.get('retry-after')).toBe('1');
      expect(parseRateLimit(replies[3]!.headers.get('ratelimit')).burst).toEqual({ r: 0, t: 1 });
      expect(members(replies[3]!.rl['ratelimit-policy'])).toEqual([
        '"burst";q=3;w=1',
        '"daily";q=100;w=86400',
      ]);

      const service = h.app.get(RateLimitService);
      const peek = await service.peek(`user:${id}`, { name: 'daily', rate: '100/d', scope });
      expect(peek.policies[0]).toMatchObject({ name: 'daily', limit: 100, remaining: 97 });
    });
  });
});
