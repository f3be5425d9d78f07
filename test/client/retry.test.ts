/** The cooperative client's retry rules (issue 24): what it waits, and what it never resends. */
import { describe, expect, it } from '@jest/globals';
import { parseRateLimitFields } from '../../lib/client/index.js';
import { mayRetry, resolveRetry, retryDelayMs } from '../../lib/client/retry.js';

const fixed = (value: number) => () => value;

describe('retryDelayMs', () => {
  it('waits Retry-After plus up to jitterMs when the response has one: it takes precedence', () => {
    const fields = parseRateLimitFields({ 'retry-after': '2', ratelimit: '"a";r=0;t=30' });
    expect(retryDelayMs(1, fields, resolveRetry({ jitterMs: 1000, random: fixed(0) }))).toBe(2000);
    expect(retryDelayMs(1, fields, resolveRetry({ jitterMs: 1000, random: fixed(0.999) }))).toBe(
      2999,
    );
    expect(retryDelayMs(3, fields, resolveRetry({ jitterMs: 0, random: fixed(0.5) }))).toBe(2000);
  });

  it('without Retry-After, backs off exponentially with full jitter, capped at maxDelayMs', () => {
    const none = parseRateLimitFields({});
    const at = (attempt: number, random: number) =>
      retryDelayMs(
        attempt,
        none,
        resolveRetry({ baseDelayMs: 100, maxDelayMs: 1000, random: fixed(random) }),
      );
    expect([1, 2, 3, 4, 5, 6].map((a) => at(a, 0.999))).toEqual([99, 199, 399, 799, 999, 999]);
    expect(at(4, 0)).toBe(0);
  });

  it('without Retry-After but with no quota left, waits at least until the reported reset', () => {
    const fields = parseRateLimitFields({ ratelimit: '"a";r=0;t=3' });
    expect(retryDelayMs(1, fields, resolveRetry({ random: fixed(0) }))).toBe(3000);
  });
});

describe('mayRetry (RFC 9110 §9.2.2)', () => {
  it('resends idempotent methods, and others only with an idempotency key', () => {
    for (const m of ['GET', 'head', 'OPTIONS', 'PUT', 'DELETE'])
      expect(mayRetry(m, false)).toBe(true);
    for (const m of ['POST', 'patch']) {
      expect(mayRetry(m, false)).toBe(false);
      expect(mayRetry(m, true)).toBe(true);
    }
  });
});

describe('resolveRetry', () => {
  it('refuses bounds that make no sense, naming the option', () => {
    expect(() => resolveRetry({ maxAttempts: 0 })).toThrow(
      'maxAttempts must be an integer >= 1, got 0',
    );
    expect(() => resolveRetry({ maxWaitMs: -1 })).toThrow(
      'maxWaitMs must be a number >= 0, got -1',
    );
    expect(() => resolveRetry({ jitterMs: Number.NaN })).toThrow('jitterMs');
  });
});
