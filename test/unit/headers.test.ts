/**
 * `RateLimit-Policy` items are made once per policy name and reused while the quota holds
 * (issue 14): a name whose quota changes between requests (plan tiers, overrides) must never
 * get a stale item.
 */
import { describe, expect, it } from '@jest/globals';
import { cachedPolicyItems, draft10Headers, type HeaderPolicy } from '../../lib/http/headers.js';

const policy = (limit: number, periodMs: number, extra: Partial<HeaderPolicy> = {}) =>
  ({
    name: 'tiered',
    allowed: true,
    limit,
    remaining: limit - 1,
    resetMs: periodMs,
    retryAfterMs: 0,
    periodMs,
    ...extra,
  }) as HeaderPolicy;

describe('draft10Headers', () => {
  it('gives each quota of one policy name its own RateLimit-Policy item, request after request', () => {
    const seen = [
      policy(10, 60_000),
      policy(20, 60_000),
      policy(10, 60_000),
      policy(10, 500),
      policy(10, 60_000),
      policy(5, 60_000, { quotaUnit: 'concurrent-requests' }),
      policy(10, 60_000),
    ].map((p) => draft10Headers([p])['RateLimit-Policy']);
    expect(seen).toEqual([
      '"tiered";q=10;w=60',
      '"tiered";q=20;w=60',
      '"tiered";q=10;w=60',
      '"tiered";q=10',
      '"tiered";q=10;w=60',
      '"tiered";q=5;qu="concurrent-requests"',
      '"tiered";q=10;w=60',
    ]);
  });

  it('joins stacked policies, each with its own item', () => {
    const burst = { ...policy(10, 1000), name: 'burst' };
    const daily = { ...policy(1000, 86_400_000), name: 'daily' };
    expect(draft10Headers([burst, daily])).toEqual({
      'RateLimit-Policy': '"burst";q=10;w=1, "daily";q=1000;w=86400',
      RateLimit: '"burst";r=9;t=1, "daily";r=999;t=86400',
    });
  });

  it('caches up to 32 quotas per name, and stays correct beyond (40 quotas, twice round)', () => {
    const name = 'many-quotas';
    const header = (limit: number) =>
      draft10Headers([{ ...policy(limit, 60_000), name }])['RateLimit-Policy'];
    const first = Array.from({ length: 32 }, (_, i) => i + 1);
    first.forEach(header);
    expect(cachedPolicyItems(name)).toBe(32);
    // A quota seen again is served from the cache: nothing is added.
    first.forEach(header);
    expect(cachedPolicyItems(name)).toBe(32);
    const limits = Array.from({ length: 40 }, (_, i) => i + 1);
    const seen = [...limits, ...limits].map(header);
    expect(seen).toEqual([...limits, ...limits].map((limit) => `"${name}";q=${limit};w=60`));
    expect(cachedPolicyItems(name)).toBe(32);
  });
});
