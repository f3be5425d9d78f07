import { Controller, Get, Headers, UnauthorizedException } from '@nestjs/common';
import { RateLimit, byTier, keys, rateLimitContext } from 'nest-rate-limit';
import { PLAN_RATES, planOf } from './plans.js';

/** The public API, for API-key clients: the budget follows the key's plan. */
@Controller('api/items')
export class ItemsController {
  @Get()
  // One budget per API key (stored hashed). The guard runs before the handler, so even
  // unknown keys are limited, at the `free` rate.
  @RateLimit(
    byTier(PLAN_RATES, (ctx) => planOf(rateLimitContext(ctx).request?.headers['x-api-key']), {
      fallback: 'free',
    }),
    { key: keys.header('x-api-key') },
  )
  list(@Headers('x-api-key') apiKey?: string) {
    const plan = planOf(apiKey);
    if (!plan) throw new UnauthorizedException('send a valid x-api-key header');
    return { plan, items: [] };
  }
}
