/**
 * A `@Priority` function is decided before the route's own guards (a call is admitted or
 * shed first), so it never sees a user a route's auth guard sets: bootstrap warns once per
 * such handler (`rate_limit.unenforced`), and not for a fixed priority, a function on a
 * route without guards of its own, or the module's own guard.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { Priority, rateLimitContext } from '../../lib/index.js';
import { CapturingLogger, createApp, PLATFORMS, type AppHandle } from './support/app.js';

class AuthGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    const request = ctx.switchToHttp().getRequest<{ user?: unknown }>();
    request.user = { plan: 'pro' };
    return true;
  }
}

const byPlan = (ctx: ExecutionContext) =>
  (rateLimitContext(ctx).user as { plan?: string } | undefined)?.plan === 'pro' ? 'high' : 'normal';

@Controller()
class PlansController {
  @Get('guarded')
  @UseGuards(AuthGuard)
  @Priority(byPlan)
  guarded() {
    return 'ok';
  }

  @Get('fixed')
  @UseGuards(AuthGuard)
  @Priority('high')
  fixed() {
    return 'ok';
  }

  @Get('open')
  @Priority(byPlan)
  open() {
    return 'ok';
  }
}

@Controller('admin')
@UseGuards(AuthGuard)
@Priority(byPlan)
class AdminController {
  @Get()
  index() {
    return 'ok';
  }
}

describe.each(PLATFORMS)('a @Priority function on a route with guards, on %s', (platform) => {
  let h: AppHandle;
  const logger = new CapturingLogger();
  beforeAll(async () => {
    h = await createApp(platform, { overload: true }, [PlansController, AdminController], {
      logger,
    });
  }, 60_000);
  afterAll(() => h?.close());

  it('is warned of once per handler at bootstrap, naming it and why', async () => {
    const warned = logger.lines
      .filter((l) => l.message.startsWith('rate_limit.unenforced'))
      .map((l) => ({
        level: l.level,
        ...(JSON.parse(l.message.slice(l.message.indexOf('{'))) as {
          route: string;
          reason: string;
        }),
      }));
    expect(warned.map(({ level, route }) => [level, route])).toEqual([
      ['warn', 'PlansController.guarded'],
      ['warn', 'AdminController.index'],
    ]);
    expect(warned[0]!.reason).toContain(
      "its @Priority function runs before this handler's own guards",
    );
    // The route still serves: the function saw no user and answered its fallback.
    expect((await h.get('/guarded')).status).toBe(200);
  });
});
