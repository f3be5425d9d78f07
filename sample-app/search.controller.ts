import { Controller, Get, Query, type ExecutionContext } from '@nestjs/common';
import { RateLimit, rateLimitContext } from 'nest-rate-limit';

/** `?filters=a,b,c` or `?filters=a&filters=b`, as a list. */
function filtersOf(filters: unknown): string[] {
  const list = Array.isArray(filters) ? filters : [filters];
  return list
    .filter((f): f is string => typeof f === 'string')
    .flatMap((f) => f.split(','))
    .filter(Boolean);
}

/** Queries with many filters hit the database harder, so they spend more of the budget. */
function searchCost(ctx: ExecutionContext): number {
  const query: Record<string, unknown> = rateLimitContext(ctx).request?.query ?? {};
  return filtersOf(query.filters).length > 5 ? 3 : 1;
}

/** Search: open to anonymous visitors (limited per IP) and to signed-in users (per user). */
@Controller('search')
export class SearchController {
  @Get()
  // No `key`: the default `keys.userOrIp` counts a signed-in user by id, anyone else by IP.
  @RateLimit('30/m', { cost: searchCost })
  // A stricter limit being tried out: counted and logged, never refusing (metrics show
  // what it would refuse as outcome="shadow_blocked").
  @RateLimit('20/m', { name: 'proposed', shadow: true })
  search(@Query('q') q?: string, @Query('filters') filters?: string | string[]) {
    return { q: q ?? '', filters: filtersOf(filters), results: [] };
  }
}
