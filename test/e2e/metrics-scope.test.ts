/**
 * Metrics per route (issue 13, item 4): every unnamed `@RateLimit` is policy `default`, so
 * the series carry the policy's scope too. After known traffic, a scrape shows login, export
 * and search refusals in series of their own, beside the module default's `global` series.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { Registry } from 'prom-client';
import { RateLimit } from '../../lib/index.js';
import { createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

@Controller('api')
class ApiController {
  @Get('login')
  @RateLimit('3/m', { scope: 'auth' })
  login() {
    return 'ok';
  }

  /** Shares the `auth` budget, and so its series. */
  @Get('login/otp')
  @RateLimit('3/m', { scope: 'auth' })
  otp() {
    return 'ok';
  }

  @Get('export')
  @RateLimit('2/m')
  export() {
    return 'ok';
  }

  @Get('search/:term')
  @RateLimit('4/m')
  search() {
    return 'ok';
  }
}

/** The `name{labels} value` samples starting with `prefix`, as a sorted record. */
async function scrape(registry: Registry, prefix: string): Promise<Record<string, number>> {
  const out: [string, number][] = [];
  for (const line of (await registry.metrics()).split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const space = line.lastIndexOf(' ');
    out.push([line.slice(0, space), Number(line.slice(space + 1))]);
  }
  return Object.fromEntries(out.sort(([a], [b]) => a.localeCompare(b)));
}

describe.each(PLATFORMS)('metrics per route scope on %s', (platform) => {
  const registry = new Registry();
  let h: AppHandle;

  beforeAll(async () => {
    h = await createApp(
      platform,
      {
        algorithm: 'fixed-window',
        default: { rate: '1000/m', name: 'api' },
        metrics: { registry },
      },
      [ApiController],
      { userFromHeader: true },
    );
  });
  afterAll(() => h?.close());

  it('login, export and search refusals land in series of their own, keyed by scope and policy', async () => {
    const user = { 'x-user': 'scraped' };
    const login = [
      ...(await times(2, () => h.get('/api/login', user))),
      ...(await times(2, () => h.get('/api/login/otp', user))),
    ];
    const exported = await times(3, () => h.get('/api/export', user));
    // Path parameters never reach a label: five terms, one series.
    const search = [];
    for (const term of ['a', 'b', 'c', 'd', 'e'])
      search.push(await h.get(`/api/search/${term}`, user));
    expect(login.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(exported.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(search.map((r) => r.status)).toEqual([200, 200, 200, 200, 429]);

    expect(await scrape(registry, 'rate_limit_decisions_total')).toEqual({
      'rate_limit_decisions_total{scope="ApiController.export",policy="default",outcome="allowed"}': 2,
      'rate_limit_decisions_total{scope="ApiController.export",policy="default",outcome="blocked"}': 1,
      'rate_limit_decisions_total{scope="ApiController.search",policy="default",outcome="allowed"}': 4,
      'rate_limit_decisions_total{scope="ApiController.search",policy="default",outcome="blocked"}': 1,
      'rate_limit_decisions_total{scope="auth",policy="default",outcome="allowed"}': 3,
      'rate_limit_decisions_total{scope="auth",policy="default",outcome="blocked"}': 1,
      // The module default admitted all 12 (a stacked refusal spends nothing, and is not its refusal).
      'rate_limit_decisions_total{scope="global",policy="api",outcome="allowed"}': 12,
    });
    // Admitted with under 20 % of the limit left: the last admitted request of each route.
    expect(await scrape(registry, 'rate_limit_near_limit_total')).toEqual({
      'rate_limit_near_limit_total{scope="ApiController.export",policy="default"}': 1,
      'rate_limit_near_limit_total{scope="ApiController.search",policy="default"}': 1,
      'rate_limit_near_limit_total{scope="auth",policy="default"}': 1,
    });
    const text = await registry.metrics();
    expect(text).not.toContain('scraped');
    expect(text).not.toContain('/api/');
  });
});
