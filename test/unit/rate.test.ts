import { describe, expect, it } from '@jest/globals';
import { RateLimitConfigError, type RateInput } from '../../lib/index.js';
import { formatRate, parseRate } from '../../lib/core/model/rate.js';
import { thrown } from '../support/thrown.js';

/** Runs `fn`, expects it to throw, and returns what it threw. */

describe('parseRate: accepted forms', () => {
  it.each([
    ['100/m', 100, 60_000],
    ['5/10s', 5, 10_000],
    ['1000/day', 1000, 86_400_000],
    ['10/500ms', 10, 500],
    ['7/13s', 7, 13_000],
  ])('parses %p as its exact limit and periodMs', (input, limit, periodMs) => {
    expect(parseRate(input)).toEqual({ limit, periodMs });
  });

  it.each([
    ['ms', 1],
    ['s', 1_000],
    ['sec', 1_000],
    ['secs', 1_000],
    ['second', 1_000],
    ['seconds', 1_000],
    ['m', 60_000],
    ['min', 60_000],
    ['mins', 60_000],
    ['minute', 60_000],
    ['minutes', 60_000],
    ['h', 3_600_000],
    ['hour', 3_600_000],
    ['hours', 3_600_000],
    ['d', 86_400_000],
    ['day', 86_400_000],
    ['days', 86_400_000],
  ])('accepts the unit %p as %p ms, with and without a count', (unit, ms) => {
    expect(parseRate(`3/${unit}`)).toEqual({ limit: 3, periodMs: ms });
    expect(parseRate(`3/2${unit}`)).toEqual({ limit: 3, periodMs: 2 * ms });
  });

  it('accepts the object form { limit, periodMs } and returns the same numbers', () => {
    expect(parseRate({ limit: 3, periodMs: 1000 })).toEqual({ limit: 3, periodMs: 1000 });
  });

  it('returns only limit and periodMs from an object with extra fields', () => {
    const input = { limit: 3, periodMs: 1000, extra: true } as RateInput;
    expect(parseRate(input)).toStrictEqual({ limit: 3, periodMs: 1000 });
  });

  it('accepts a rate exactly at limit × periodMs = 2^50', () => {
    // 2^50 = 1024 × 2^40; 2^40 ms is a valid period through the object form.
    expect(parseRate({ limit: 1024, periodMs: 2 ** 40 })).toEqual({
      limit: 1024,
      periodMs: 2 ** 40,
    });
  });
});

describe('parseRate: rejected forms', () => {
  const badStrings = [
    '100/x',
    '0/m',
    '-1/m',
    '1.5/m',
    '100',
    '',
    '100/',
    '/m',
    '100/0s',
    '100/1.5s',
    ' 100/m',
    '100/m ',
    '100/M',
    '100/ms2',
    '01/m',
    '100/hs',
    '100/ss',
    '100/constructor',
    '100/toString',
    '2000000000/d',
  ];

  it.each(badStrings)(
    'rejects %p with ERR_RATE_LIMIT_RATE, quoting it and where it came from',
    (input) => {
      const error = thrown(() => parseRate(input, 'ReportsController.export'));
      expect(error).toBeInstanceOf(RateLimitConfigError);
      const e = error as RateLimitConfigError;
      expect(e.code).toBe('ERR_RATE_LIMIT_RATE');
      expect(e.name).toBe('RateLimitConfigError');
      expect(e.where).toBe('ReportsController.export');
      expect(e.message).toContain(JSON.stringify(input));
      expect(e.message).toContain('ReportsController.export');
      expect(e.message).toContain('[ERR_RATE_LIMIT_RATE]');
    },
  );

  it.each(badStrings)('rejects %p without a where, and then names none', (input) => {
    const error = thrown(() => parseRate(input)) as RateLimitConfigError;
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect(error.code).toBe('ERR_RATE_LIMIT_RATE');
    expect(error.where).toBeUndefined();
    expect(error.message).toContain(JSON.stringify(input));
    expect(error.message).not.toContain('(in ');
  });

  it.each([
    [{ limit: 0, periodMs: 1000 }, '{"limit":0,"periodMs":1000}'],
    [{ limit: 1, periodMs: 0 }, '{"limit":1,"periodMs":0}'],
    [{ limit: 1.5, periodMs: 1000 }, '{"limit":1.5,"periodMs":1000}'],
    [{ limit: -1, periodMs: 1000 }, '{"limit":-1,"periodMs":1000}'],
    [{ limit: '3', periodMs: 1000 }, '{"limit":"3","periodMs":1000}'],
    [{ limit: 1, periodMs: 2 ** 53 }, '{"limit":1,"periodMs":9007199254740992}'],
    [{ limit: 2 ** 25 + 1, periodMs: 2 ** 25 }, '{"limit":33554433,"periodMs":33554432}'],
  ])('rejects the object %j with ERR_RATE_LIMIT_RATE, quoting it', (input, quoted) => {
    const error = thrown(() =>
      parseRate(input as unknown as RateInput, 'ReportsController.export'),
    ) as RateLimitConfigError;
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect(error.code).toBe('ERR_RATE_LIMIT_RATE');
    expect(error.message).toContain(quoted);
    expect(error.message).toContain('(in ReportsController.export)');
  });

  it('rejects { limit: 1, periodMs: NaN } with ERR_RATE_LIMIT_RATE', () => {
    const error = thrown(() =>
      parseRate({ limit: 1, periodMs: NaN }, 'ReportsController.export'),
    ) as RateLimitConfigError;
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect(error.code).toBe('ERR_RATE_LIMIT_RATE');
    expect(error.message).toContain('"limit":1');
    expect(error.message).toContain('(in ReportsController.export)');
  });

  // Surprising: the message renders the bad value through JSON.stringify, which turns NaN
  // into null, so the user reads `{"limit":1,"periodMs":null}` for a NaN they passed.
  // The contract says the message quotes the bad value (DESIGN §3).
  it('quotes a NaN periodMs as NaN, not as null', () => {
    const error = thrown(() => parseRate({ limit: 1, periodMs: NaN })) as RateLimitConfigError;
    expect(error.message).toContain('NaN');
  });

  it.each([
    [null, 'null'],
    [undefined, 'undefined'],
    [42, '42'],
    [true, 'true'],
  ])('rejects the non-rate %p with ERR_RATE_LIMIT_RATE, quoting it', (input, quoted) => {
    const error = thrown(() =>
      parseRate(input as unknown as RateInput, 'ReportsController.export'),
    ) as RateLimitConfigError;
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect(error.code).toBe('ERR_RATE_LIMIT_RATE');
    expect(error.message).toContain(`invalid rate ${quoted}:`);
    expect(error.message).toContain('(in ReportsController.export)');
  });

  it('rejects a too-large rate (limit × periodMs > 2^50) saying so', () => {
    const error = thrown(() =>
      parseRate('2000000000/d', 'ReportsController.export'),
    ) as RateLimitConfigError;
    expect(error.code).toBe('ERR_RATE_LIMIT_RATE');
    expect(error.message).toBe(
      'rate "2000000000/d" is too large: limit × periodMs must not exceed 2^50 ' +
        '(in ReportsController.export) [ERR_RATE_LIMIT_RATE]' +
        ' (see docs/reference/errors.md#err_rate_limit_rate in the nest-rate-limit package)',
    );
  });

  it('rejects one unit above 2^50 in the object form', () => {
    const error = thrown(() =>
      parseRate({ limit: 1025, periodMs: 2 ** 40 }),
    ) as RateLimitConfigError;
    expect(error.code).toBe('ERR_RATE_LIMIT_RATE');
    expect(error.message).toContain('too large');
  });
});

describe('formatRate', () => {
  it.each([
    [{ limit: 100, periodMs: 60_000 }, '100/m'],
    [{ limit: 5, periodMs: 10_000 }, '5/10s'],
    [{ limit: 1000, periodMs: 86_400_000 }, '1000/d'],
    [{ limit: 3, periodMs: 7_200_000 }, '3/2h'],
    [{ limit: 7, periodMs: 1_500 }, '7/1500ms'],
    [{ limit: 1, periodMs: 1 }, '1/ms'],
  ])('writes %p as %p, which parses back to it', (rate, written) => {
    expect(formatRate(rate)).toBe(written);
    expect(parseRate(written)).toEqual(rate);
  });
});
