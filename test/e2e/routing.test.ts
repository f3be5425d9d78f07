/**
 * Which policies apply to which route (DESIGN §6): module default, @SkipRateLimit, handler
 * over class, scopes, tiers, a route guarded twice, and `global: false` (issue 3, acceptance
 * points 3, 5, 9 and 10).
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, UseGuards } from '@nestjs/common';
import { byTier, RateLimit, RateLimitGuard, SkipRateLimit } from '../../lib/index.js';
import { createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

// ---- Module default '4/m' -------------------------------------------------------------

@Controller('plain')
class PlainController {
  @Get('a')
  a() {
    return 'a';
  }

  @Get('b')
  b() {
    return 'b';
  }
}

@Controller('skipped-class')
@SkipRateLimit()
class SkippedClassController {
  @Get('undecorated')
  undecorated() {
    return 'free';
  }

  @Get('overridden')
  @RateLimit('2/m')
  overridden() {
    return 'limited';
  }
}

@Controller('skipped-handler')
class SkippedHandlerController {
  @Get('skipped')
  @SkipRateLimit()
  skipped() {
    return 'free';
  }

  @Get('sibling')
  sibling() {
    return 'limited';
  }
}

// ---- No module default ----------------------------------------------------------------

@Controller('stack')
@RateLimit('3/m', { name: 'burst' })
@RateLimit('100/d', { name: 'daily' })
class StackController {
  @Get('all')
  all() {
    return 'both';
  }

  @Get('no-daily')
  @SkipRateLimit('daily')
  noDaily() {
    return 'burst only';
  }
}

@Controller('scopes')
class ScopeController {
  @Get('shared-1')
  @RateLimit('3/m', { scope: 'shared' })
  shared1() {
    return 1;
  }

  @Get('shared-2')
  @RateLimit('3/m', { scope: 'shared' })
  shared2() {
    return 2;
  }

  @Get('own-1')
  @RateLimit('3/m')
  own1() {
    return 1;
  }

  @Get('own-2')
  @RateLimit('3/m')
  own2() {
    return 2;
  }
}

@Controller('tier')
class TierController {
  @Get()
  @RateLimit(
    byTier(
      { free: '2/m', pro: '5/m' },
      (ctx) =>
        ctx.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-plan'],
      { fallback: 'free' },
    ),
  )
  tiered() {
    return 'ok';
  }
}

@Controller('twice')
class TwiceController {
  @Get()
  @UseGuards(RateLimitGuard)
  @RateLimit('5/m')
  twice() {
    return 'once';
  }
}

// ---- global: false ---------------------------------------------------------------------

@Controller('manual')
class ManualController {
  @Get('unguarded')
  @RateLimit('2/m')
  unguarded() {
    return 'free';
  }

  @Get('guarded')
  @UseGuards(RateLimitGuard)
  @RateLimit('2/m')
  guarded() {
    return 'limited';
  }
}

const codes = (replies: { status: number }[]) => replies.map((r) => r.status);

describe.each(PLATFORMS)('routing on %s', (platform) => {
  describe("module default '4/m'", () => {
    let h: AppHandle;
    beforeAll(async () => {
      h = await createApp(
        platform,
        { default: '4/m' },
        [PlainController, SkippedClassController, SkippedHandlerController],
        { userFromHeader: true },
      );
    });
    afterAll(() => h?.close());

    it('applies to undecorated routes, and two undecorated routes share one budget (scope global)', async () => {
      const user = { 'x-user': 'plain' };
      const replies = [
        await h.get('/plain/a', user),
        await h.get('/plain/b', user),
        await h.get('/plain/a', user),
        await h.get('/plain/b', user),
        await h.get('/plain/a', user),
        await h.get('/plain/b', user),
      ];
      expect(codes(replies)).toEqual([200, 200, 200, 200, 429, 429]);
      expect(replies.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual([
        '3',
        '2',
        '1',
        '0',
        '0',
        '0',
      ]);
      expect(replies[0]!.rl['ratelimit-policy']).toBe('"default";q=4;w=60');
    });

    it('the default budget is shared with other undecorated routes of other controllers', async () => {
      const user = { 'x-user': 'cross-controller' };
      await times(3, () => h.get('/plain/a', user));
      const sibling = await h.get('/skipped-handler/sibling', user);
      expect(sibling.status).toBe(200);
      expect(sibling.headers.get('x-ratelimit-remaining')).toBe('0');
    });

    it('@SkipRateLimit() on a class exempts its undecorated routes: no limit, no headers', async () => {
      const replies = await times(6, () =>
        h.get('/skipped-class/undecorated', { 'x-user': 'skip-class' }),
      );
      expect(codes(replies)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(replies.map((r) => r.rl)).toEqual(replies.map(() => ({})));
    });

    it('@SkipRateLimit() on a handler exempts that handler only', async () => {
      const user = { 'x-user': 'skip-handler' };
      const skipped = await times(6, () => h.get('/skipped-handler/skipped', user));
      expect(codes(skipped)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(skipped.map((r) => r.rl)).toEqual(skipped.map(() => ({})));
      const sibling = await h.get('/skipped-handler/sibling', user);
      expect(sibling.status).toBe(200);
      expect(sibling.rl['ratelimit-policy']).toBe('"default";q=4;w=60');
      expect(sibling.headers.get('x-ratelimit-remaining')).toBe('3');
    });

    it('a handler @RateLimit overrides a class @SkipRateLimit()', async () => {
      const replies = await times(3, () =>
        h.get('/skipped-class/overridden', { 'x-user': 'override' }),
      );
      expect(codes(replies)).toEqual([200, 200, 429]);
      expect(replies[0]!.rl['ratelimit-policy']).toBe('"default";q=2;w=60');
      expect(replies.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['1', '0', '0']);
    });
  });

  describe('stacked policies, scopes, tiers, a route guarded twice', () => {
    let h: AppHandle;
    beforeAll(async () => {
      h = await createApp(
        platform,
        {},
        [StackController, ScopeController, TierController, TwiceController],
        { userFromHeader: true },
      );
    });
    afterAll(() => h?.close());

    it("@SkipRateLimit('daily') skips only that policy", async () => {
      const user = { 'x-user': 'skip-daily' };
      const all = await h.get('/stack/all', user);
      expect(all.status).toBe(200);
      expect(all.rl['ratelimit-policy']?.split(', ').sort()).toEqual([
        '"burst";q=3;w=60',
        '"daily";q=100;w=86400',
      ]);
      const noDaily = await times(4, () => h.get('/stack/no-daily', user));
      expect(codes(noDaily)).toEqual([200, 200, 200, 429]);
      expect(noDaily[0]!.rl['ratelimit-policy']).toBe('"burst";q=3;w=60');
      expect(noDaily[0]!.rl.ratelimit).toMatch(/^"burst";r=2;t=\d+$/);
    });

    it('two routes with the same scope share one budget', async () => {
      const user = { 'x-user': 'shared-scope' };
      const replies = [
        await h.get('/scopes/shared-1', user),
        await h.get('/scopes/shared-2', user),
        await h.get('/scopes/shared-1', user),
        await h.get('/scopes/shared-2', user),
      ];
      expect(codes(replies)).toEqual([200, 200, 200, 429]);
      expect(replies.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual([
        '2',
        '1',
        '0',
        '0',
      ]);
    });

    it('routes without a scope share nothing: each has its own budget', async () => {
      const user = { 'x-user': 'own-scope' };
      const first = await times(3, () => h.get('/scopes/own-1', user));
      expect(codes(first)).toEqual([200, 200, 200]);
      const second = await times(4, () => h.get('/scopes/own-2', user));
      expect(codes(second)).toEqual([200, 200, 200, 429]);
      expect(second[0]!.headers.get('x-ratelimit-remaining')).toBe('2');
    });

    it.each([
      ['free', 'free', 2],
      ['pro', 'pro', 5],
      ['an unknown plan (fallback free)', 'platinum', 2],
      ['no plan (fallback free)', undefined, 2],
    ] as const)('byTier: %s gets its own limit', async (_label, plan, limit) => {
      const headers: Record<string, string> = { 'x-user': `tier-${plan ?? 'none'}` };
      if (plan !== undefined) headers['x-plan'] = plan;
      const replies = await times(limit + 1, () => h.get('/tier', headers));
      expect(codes(replies)).toEqual([...new Array<number>(limit).fill(200), 429]);
      expect(replies[0]!.headers.get('x-ratelimit-limit')).toBe(String(limit));
      expect(replies[0]!.rl['ratelimit-policy']).toBe(`"default";q=${limit};w=60`);
    });

    it('a route guarded twice (global guard + @UseGuards(RateLimitGuard)) counts once', async () => {
      const replies = await times(3, () => h.get('/twice', { 'x-user': 'twice' }));
      expect(codes(replies)).toEqual([200, 200, 200]);
      expect(replies.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['4', '3', '2']);
      expect(replies.map((r) => r.rl.ratelimit?.replace(/;t=\d+$/, ''))).toEqual([
        '"default";r=4',
        '"default";r=3',
        '"default";r=2',
      ]);
    });
  });

  describe('global: false', () => {
    let h: AppHandle;
    beforeAll(async () => {
      h = await createApp(platform, { global: false }, [ManualController], {
        userFromHeader: true,
      });
    });
    afterAll(() => h?.close());

    it('a @RateLimit route without @UseGuards(RateLimitGuard) is not limited', async () => {
      const replies = await times(4, () => h.get('/manual/unguarded', { 'x-user': 'manual' }));
      expect(codes(replies)).toEqual([200, 200, 200, 200]);
      expect(replies.map((r) => r.rl)).toEqual(replies.map(() => ({})));
    });

    it('@UseGuards(RateLimitGuard) limits the route and sets headers', async () => {
      const replies = await times(3, () => h.get('/manual/guarded', { 'x-user': 'manual' }));
      expect(codes(replies)).toEqual([200, 200, 429]);
      expect(replies[0]!.rl).toEqual({
        'x-ratelimit-limit': '2',
        'x-ratelimit-remaining': '1',
        'x-ratelimit-reset': '30',
        ratelimit: '"default";r=1;t=30',
        'ratelimit-policy': '"default";q=2;w=60',
      });
      expect(replies[2]!.headers.get('retry-after')).toBe('30');
      expect(replies[2]!.rl.ratelimit).toBe('"default";r=0;t=30');
    });
  });
});
