/**
 * `headers.standard` (issue 24): one function per draft of draft-ietf-httpapi-ratelimit-headers,
 * each checked field by field against that draft's own text and examples.
 */
import { describe, expect, it } from '@jest/globals';
import { draft6Headers, draft7Headers, draft11Headers } from '../../lib/http/header-drafts.js';
import { draft10Headers, rateLimitHeaders, type HeaderPolicy } from '../../lib/http/headers.js';
import { parseRateLimitFields } from '../../lib/client/index.js';

const admitted = (
  name: string,
  limit: number,
  periodMs: number,
  remaining: number,
  resetMs: number,
) =>
  ({ name, allowed: true, limit, remaining, resetMs, retryAfterMs: 0, periodMs }) as HeaderPolicy;

const refused = (
  name: string,
  limit: number,
  periodMs: number,
  remaining: number,
  retryAfterMs: number,
) =>
  ({
    name,
    allowed: false,
    limit,
    remaining,
    resetMs: periodMs,
    retryAfterMs,
    periodMs,
  }) as HeaderPolicy;

describe('draft 6: RateLimit-Limit, -Remaining, -Reset and RateLimit-Policy', () => {
  it('gives the expiring limit in three fields and every quota in RateLimit-Policy', () => {
    // draft-06 §5: "RateLimit-Policy: 10;w=1, 50;w=60, 1000;w=3600, 5000;w=86400"
    const policies = [
      admitted('s', 10, 1000, 9, 100),
      admitted('m', 50, 60_000, 3, 40_000),
      admitted('h', 1000, 3_600_000, 990, 36_000),
      admitted('d', 5000, 86_400_000, 4990, 864_000),
    ];
    expect(draft6Headers(policies)).toEqual({
      'RateLimit-Policy': '50;w=60, 10;w=1, 1000;w=3600, 5000;w=86400',
      'RateLimit-Limit': '50',
      'RateLimit-Remaining': '3',
      'RateLimit-Reset': '40',
    });
  });
});

describe('draft 7: RateLimit dictionary and RateLimit-Policy', () => {
  it('writes the example of §3.5: "RateLimit-Policy: 100;w=10" with "RateLimit: limit=100, remaining=50, reset=5"', () => {
    expect(draft7Headers([admitted('default', 100, 10_000, 50, 5000)])).toEqual({
      'RateLimit-Policy': '100;w=10',
      RateLimit: 'limit=100, remaining=50, reset=5',
    });
  });

  it('never lists two quota policies with the same quota (§3.5), the expiring one kept', () => {
    const headers = draft7Headers([
      admitted('a', 10, 1000, 9, 100),
      admitted('b', 10, 60_000, 1, 54_000),
    ]);
    expect(headers['RateLimit-Policy']).toBe('10;w=60');
    expect(headers.RateLimit).toBe('limit=10, remaining=1, reset=54');
  });

  it('lists only rates with a whole-second window in RateLimit-Policy (w is required there)', () => {
    const slots = {
      ...refused('concurrent', 5, 30_000, 0, 1000),
      quotaUnit: 'concurrent-requests' as const,
    };
    const headers = draft7Headers([
      slots,
      admitted('rate', 5, 60_000, 3, 24_000),
      admitted('fast', 10, 500, 9, 50),
    ]);
    // The refusing concurrency limit is the expiring one, but has no window to list: no list,
    // rather than one whose first item a client would pair with it.
    expect(headers.RateLimit).toBe('limit=5, remaining=0, reset=1');
    expect(headers['RateLimit-Policy']).toBeUndefined();
    const rates = draft7Headers([
      admitted('rate', 5, 60_000, 3, 24_000),
      admitted('fast', 10, 500, 9, 50),
    ]);
    expect(rates['RateLimit-Policy']).toBe('5;w=60');
  });

  it('10/500ms beside 100/m never reads back as 10 per 60 s', () => {
    const policies = [admitted('fast', 10, 500, 9, 50), admitted('minute', 100, 60_000, 99, 600)];
    for (const headers of [draft6Headers(policies), draft7Headers(policies)]) {
      expect(headers['RateLimit-Policy']).toBeUndefined();
      expect(parseRateLimitFields(headers).tightest).toEqual({
        remaining: 9,
        resetSeconds: 1,
        limit: 10,
      });
    }
  });

  it('on a refusal, reset is the wait: "the same point in time as the Retry-After field value" (§4)', () => {
    expect(draft7Headers([refused('default', 5, 60_000, 0, 11_500)]).RateLimit).toBe(
      'limit=5, remaining=0, reset=12',
    );
  });
});

describe('drafts 8 and 10: structured RateLimit and RateLimit-Policy per policy', () => {
  it('writes the examples of draft 8 §3.2 and §4.2', () => {
    expect(draft10Headers([admitted('default', 100, 10_000, 50, 30_000)])).toEqual({
      'RateLimit-Policy': '"default";q=100;w=10',
      RateLimit: '"default";r=50;t=30',
    });
    const two = draft10Headers([
      admitted('permin', 50, 60_000, 49, 1200),
      admitted('perhr', 1000, 3_600_000, 999, 3600),
    ]);
    expect(two['RateLimit-Policy']).toBe('"permin";q=50;w=60, "perhr";q=1000;w=3600');
  });
});

describe('draft 11: t is the effective window', () => {
  it('for a token bucket, t is the time until the next unit comes back, not until it is full', () => {
    // 5/s, capacity 5, all 5 spent at once: full again in 1000 ms, the next unit in 200 ms.
    const bucket = { ...admitted('default', 5, 1000, 0, 1000), capacity: 5 };
    expect(draft11Headers([bucket]).RateLimit).toBe('"default";r=0;t=1');
    // 100/h, capacity 100, 10 spent: full again in 360 s, the next unit in 36 s.
    const hourly = { ...admitted('default', 100, 3_600_000, 90, 360_000), capacity: 100 };
    expect(draft10Headers([hourly]).RateLimit).toBe('"default";r=90;t=360');
    expect(draft11Headers([hourly]).RateLimit).toBe('"default";r=90;t=36');
    // Full: within one emission interval (36 s) no more than the 100 can be used.
    expect(draft11Headers([{ ...hourly, remaining: 100, resetMs: 0 }]).RateLimit).toBe(
      '"default";r=100;t=36',
    );
  });

  it('for a window, and on a refusal, t is as in draft 10: Retry-After is never earlier (§6)', () => {
    const window = admitted('default', 100, 60_000, 40, 25_000);
    expect(draft11Headers([window]).RateLimit).toBe('"default";r=40;t=25');
    const denied = { ...refused('default', 100, 3_600_000, 0, 35_500), capacity: 100 };
    expect(draft11Headers([denied]).RateLimit).toBe('"default";r=0;t=36');
  });
});

describe('rateLimitHeaders with each standard', () => {
  const policies = [
    admitted('burst', 10, 1000, 4, 600),
    admitted('daily', 1000, 86_400_000, 900, 8_640_000),
  ];
  it.each(['draft-6', 'draft-7', 'draft-8', 'draft-10', 'draft-11'] as const)(
    '%s: our own parser reads back the tightest quota, with or without X-RateLimit-*',
    (standard) => {
      for (const legacy of [true, false]) {
        const fields = parseRateLimitFields(rateLimitHeaders(policies, { standard, legacy }));
        expect(fields.form).toBe(
          standard === 'draft-6' ? 'draft-6' : standard === 'draft-7' ? 'draft-7' : 'structured',
        );
        expect(fields.tightest).toMatchObject({ remaining: 4, limit: 10, windowSeconds: 1 });
      }
    },
  );
});
