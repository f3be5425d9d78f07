/**
 * The cooperative client's parser (issue 24): every form of draft-ietf-httpapi-ratelimit-headers
 * a server sends, `X-RateLimit-*`, and `Retry-After` (RFC 9110 §10.2.3).
 */
import { describe, expect, it } from '@jest/globals';
import { parseRateLimitFields, parseRetryAfter } from '../../lib/client/index.js';

const NOW = Date.parse('2026-12-02T12:00:00Z');

describe('parseRateLimitFields', () => {
  it('reads the structured fields of drafts 8 to 11, per policy, with their quota, window and partition', () => {
    const fields = parseRateLimitFields(
      new Headers({
        'RateLimit-Policy': '"burst";q=5;w=1, "daily";q=1000;w=86400;pk=:dXNlcjo0Mg==:',
        RateLimit: '"burst";r=0;t=1, "daily";r=990;t=86000',
      }),
    );
    expect(fields.form).toBe('structured');
    expect(fields.quotas).toEqual([
      { name: 'burst', remaining: 0, resetSeconds: 1, limit: 5, windowSeconds: 1 },
      {
        name: 'daily',
        remaining: 990,
        resetSeconds: 86000,
        limit: 1000,
        windowSeconds: 86400,
        partitionKey: 'dXNlcjo0Mg==',
      },
    ]);
    expect(fields.tightest?.name).toBe('burst');
  });

  it('takes the lowest remaining as the tightest, ties to the longest reset', () => {
    const fields = parseRateLimitFields({ ratelimit: '"a";r=3;t=10, "b";r=3;t=60, "c";r=9;t=1' });
    expect(fields.tightest).toEqual({ name: 'b', remaining: 3, resetSeconds: 60 });
  });

  it("reads draft 7's dictionary with its policy", () => {
    const fields = parseRateLimitFields({
      'ratelimit-policy': '100;w=60',
      ratelimit: 'limit=100, remaining=42, reset=17',
    });
    expect(fields).toEqual({
      form: 'draft-7',
      quotas: [{ remaining: 42, resetSeconds: 17, limit: 100, windowSeconds: 60 }],
      tightest: { remaining: 42, resetSeconds: 17, limit: 100, windowSeconds: 60 },
    });
  });

  it("reads draft 6's separate fields", () => {
    const fields = parseRateLimitFields({
      'RateLimit-Policy': '10;w=1',
      'RateLimit-Limit': '10',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '1',
    });
    expect(fields.form).toBe('draft-6');
    expect(fields.quotas).toEqual([{ remaining: 0, resetSeconds: 1, limit: 10, windowSeconds: 1 }]);
  });

  it('reads X-RateLimit-*, a reset in seconds or as an epoch time (GitHub)', () => {
    expect(
      parseRateLimitFields(
        { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '7', 'x-ratelimit-reset': '30' },
        NOW,
      ).quotas,
    ).toEqual([{ remaining: 7, resetSeconds: 30, limit: 60 }]);
    const epoch = String(NOW / 1000 + 1800);
    expect(
      parseRateLimitFields({ 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': epoch }, NOW)
        .quotas,
    ).toEqual([{ remaining: 0, resetSeconds: 1800 }]);
  });

  it('reads an epoch X-RateLimit-Reset to the ms: 1.5 s away is 1.5 s, not rounded up again to 2', () => {
    const epoch = String(NOW / 1000 + 2);
    expect(
      parseRateLimitFields(
        { 'X-RateLimit-Limit': '5', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': epoch },
        NOW + 500,
      ).tightest,
    ).toEqual({ remaining: 0, resetSeconds: 1.5, limit: 5 });
  });

  it('prefers the structured fields to X-RateLimit-* beside them, and reads the latter when the former is malformed', () => {
    const legacy = {
      'X-RateLimit-Limit': '5',
      'X-RateLimit-Remaining': '4',
      'X-RateLimit-Reset': '1',
    };
    expect(parseRateLimitFields({ ...legacy, RateLimit: '"default";r=2;t=1' }).quotas).toEqual([
      { name: 'default', remaining: 2, resetSeconds: 1 },
    ]);
    const broken = parseRateLimitFields({ ...legacy, RateLimit: '"default;r=2' });
    expect(broken.form).toBe('x-ratelimit');
    expect(broken.quotas).toEqual([{ remaining: 4, resetSeconds: 1, limit: 5 }]);
  });

  it('reports nothing, without throwing, for absent or hostile fields', () => {
    for (const headers of [
      {},
      { RateLimit: '' },
      { RateLimit: '"a";r=-1;t=1' },
      { RateLimit: '"a";r=1;t=1,' },
      { RateLimit: '("a" "b");r=1' },
      { RateLimit: '"a";r=1;t=@x' },
      // Upper-case hex is not a Display String (RFC 9651 §4.2.10).
      { RateLimit: '"a";r=1;note=%"caf%C3%A9"' },
      { 'X-RateLimit-Remaining': 'lots' },
      { RateLimit: '"\u0001";r=1' },
    ]) {
      expect(parseRateLimitFields(headers).quotas).toEqual([]);
    }
  });

  it('reads a field holding any RFC 9651 member: Inner Lists, Dates, Display Strings are parsed, not fatal', () => {
    const fields = parseRateLimitFields({
      ratelimit: '"a";r=2;t=5;acme-at=@1767225600;acme-note=%"caf%c3%a9 x\\y"',
      'ratelimit-policy': '"a";q=10;w=60;acme-tags=?1',
    });
    expect(fields.quotas).toEqual([
      { name: 'a', remaining: 2, resetSeconds: 5, limit: 10, windowSeconds: 60 },
    ]);
    // An Inner List as a member is not a policy: the other members still count.
    expect(
      parseRateLimitFields({
        'ratelimit-policy': '("x" "y"), "a";q=4;w=1',
        ratelimit: '"a";r=1;t=1',
      }).tightest,
    ).toEqual({ name: 'a', remaining: 1, resetSeconds: 1, limit: 4, windowSeconds: 1 });
  });

  it("pairs draft 6/7's limit only with a RateLimit-Policy item of the same quota", () => {
    // Another server's list without the quota sent: no window rather than the wrong one.
    expect(
      parseRateLimitFields({
        'RateLimit-Limit': '10',
        'RateLimit-Remaining': '9',
        'RateLimit-Reset': '1',
        'RateLimit-Policy': '100;w=60',
      }).tightest,
    ).toEqual({ remaining: 9, resetSeconds: 1, limit: 10 });
    expect(
      parseRateLimitFields({
        RateLimit: 'limit=10, remaining=9, reset=1',
        'RateLimit-Policy': '100;w=60, 10;w=1',
      }).tightest,
    ).toEqual({ remaining: 9, resetSeconds: 1, limit: 10, windowSeconds: 1 });
  });

  it('reports nothing for no headers at all (undefined, null)', () => {
    expect(parseRateLimitFields(undefined)).toEqual({ quotas: [] });
    expect(parseRateLimitFields(null)).toEqual({ quotas: [] });
  });

  it('joins repeated fields (an array value) into one list', () => {
    const fields = parseRateLimitFields({ ratelimit: ['"a";r=5;t=1', '"b";r=1;t=9'] });
    expect(fields.quotas.map((q) => q.name)).toEqual(['a', 'b']);
  });
});

describe('parseRetryAfter (RFC 9110 §10.2.3)', () => {
  it('takes delay-seconds and HTTP-dates, in ms', () => {
    expect(parseRetryAfter('120', NOW)).toBe(120_000);
    expect(parseRetryAfter('0', NOW)).toBe(0);
    expect(parseRetryAfter('Wed, 02 Dec 2026 12:00:30 GMT', NOW)).toBe(30_000);
    expect(parseRetryAfter('Wed, 02 Dec 2026 11:00:00 GMT', NOW)).toBe(0);
    // The obsolete forms a recipient still accepts (RFC 9110 §5.6.7).
    expect(parseRetryAfter('Wednesday, 02-Dec-26 12:00:10 GMT', NOW)).toBe(10_000);
    expect(parseRetryAfter('Wed Dec  2 12:00:20 2026', NOW)).toBe(20_000);
  });

  it('ignores what is neither', () => {
    for (const value of [undefined, '', '-1', '1.5', 'soon', '12s', 'Wed, garbage 99']) {
      expect(parseRetryAfter(value, NOW)).toBeUndefined();
    }
  });

  it('is reported beside the quotas, which it takes precedence over', () => {
    const fields = parseRateLimitFields({ 'retry-after': '3', ratelimit: '"a";r=0;t=1' });
    expect(fields.retryAfterMs).toBe(3000);
  });
});
