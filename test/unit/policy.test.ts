import { describe, expect, it } from '@jest/globals';
import {
  definePolicy,
  RateLimitConfigError,
  type Algorithm,
  type PolicyInput,
  type RateLimitErrorCode,
} from '../../lib/index.js';
import { ALGORITHMS, resolvePolicy } from '../../lib/core/model/policy.js';

const WHERE = 'ReportsController.export';

/** Resolves `input` (via resolvePolicy and definePolicy), expects both to throw, returns the error. */
function rejected(input: unknown, where?: string): RateLimitConfigError {
  let first: unknown;
  try {
    resolvePolicy(input as PolicyInput, where);
  } catch (error) {
    first = error;
  }
  expect(first).toBeInstanceOf(RateLimitConfigError);
  expect(() => definePolicy(input as PolicyInput, where)).toThrow(RateLimitConfigError);
  return first as RateLimitConfigError;
}

function expectCode(error: RateLimitConfigError, code: RateLimitErrorCode): void {
  expect(error.code).toBe(code);
  expect(error.message).toContain(`[${code}]`);
  expect(error.message).toContain(`(in ${WHERE})`);
  expect(error.where).toBe(WHERE);
}

describe('resolvePolicy: defaults', () => {
  it('defaults name to "default", algorithm to token-bucket and capacity to the limit', () => {
    expect(resolvePolicy({ rate: '100/m' })).toStrictEqual({
      name: 'default',
      limit: 100,
      periodMs: 60_000,
      algorithm: 'token-bucket',
      capacity: 100,
    });
  });

  it('keeps name, scope and cost when given', () => {
    expect(
      resolvePolicy({ name: 'daily', rate: '10000/d', scope: 'auth', cost: 10 }),
    ).toStrictEqual({
      name: 'daily',
      limit: 10000,
      periodMs: 86_400_000,
      algorithm: 'token-bucket',
      capacity: 10000,
      scope: 'auth',
      cost: 10,
    });
  });

  it.each(['fixed-window', 'sliding-window', 'token-bucket', 'gcra'] as const)(
    'sets capacity to the limit for %s without a burst',
    (algorithm) => {
      const policy = resolvePolicy({ rate: '5/10s', algorithm });
      expect(policy.algorithm).toBe(algorithm);
      expect(policy.capacity).toBe(5);
      expect(policy.limit).toBe(5);
      expect(policy.periodMs).toBe(10_000);
    },
  );

  it('returns a frozen object', () => {
    const policy = resolvePolicy({ rate: '100/m', scope: 'auth', cost: 2 });
    expect(Object.isFrozen(policy)).toBe(true);
    expect(() => {
      (policy as { limit: number }).limit = 1;
    }).toThrow(TypeError);
    expect(policy.limit).toBe(100);
  });

  it('definePolicy returns the same frozen, resolved policy', () => {
    const policy = definePolicy({ name: 'burst', rate: '10/s', burst: 20 }, WHERE);
    expect(Object.isFrozen(policy)).toBe(true);
    expect(policy).toStrictEqual({
      name: 'burst',
      limit: 10,
      periodMs: 1000,
      algorithm: 'token-bucket',
      capacity: 20,
    });
  });

  it('exports the five algorithms in order', () => {
    expect(ALGORITHMS).toEqual([
      'fixed-window',
      'sliding-window',
      'sliding-log',
      'token-bucket',
      'gcra',
    ]);
  });
});

describe('resolvePolicy: burst', () => {
  it.each(['token-bucket', 'gcra'] as const)('burst sets the capacity for %s', (algorithm) => {
    const policy = resolvePolicy({ rate: '10/s', algorithm, burst: 25 });
    expect(policy.capacity).toBe(25);
    expect(policy.limit).toBe(10);
  });

  it('burst below the limit sets a smaller capacity', () => {
    expect(resolvePolicy({ rate: '10/s', burst: 3 }).capacity).toBe(3);
  });

  it.each(['fixed-window', 'sliding-window'] as const)(
    'rejects a burst for %s with ERR_RATE_LIMIT_BURST',
    (algorithm) => {
      const error = rejected({ rate: '10/s', algorithm, burst: 20 }, WHERE);
      expectCode(error, 'ERR_RATE_LIMIT_BURST');
      expect(error.message).toContain(`not ${algorithm}`);
      expect(error.message).toContain('burst 20');
    },
  );

  it.each([
    [0, '0'],
    [-1, '-1'],
    [1.5, '1.5'],
    ['5', '"5"'],
    [NaN, 'NaN'],
    [null, 'null'],
  ])('rejects burst %p with ERR_RATE_LIMIT_BURST, quoting it', (burst, quoted) => {
    const error = rejected({ rate: '10/s', burst }, WHERE);
    expectCode(error, 'ERR_RATE_LIMIT_BURST');
    expect(error.message).toContain(`invalid burst ${quoted} in policy "default"`);
  });

  it('rejects a burst whose burst × periodMs exceeds 2^50', () => {
    const error = rejected({ rate: '1/d', burst: 2 ** 24 }, WHERE);
    expectCode(error, 'ERR_RATE_LIMIT_BURST');
  });
});

describe('resolvePolicy: a fixed window past limit × periodMs = 2^50', () => {
  const month = 30 * 86_400_000;

  it('accepts 1,000,000 per 30 days as a fixed window (a count and an end, no scaled product), not as any other algorithm', () => {
    const rate = { limit: 1_000_000, periodMs: month };
    expect(resolvePolicy({ rate, algorithm: 'fixed-window' })).toMatchObject(rate);
    for (const algorithm of ALGORITHMS.filter((a) => a !== 'fixed-window')) {
      expectCode(rejected({ rate, algorithm }, WHERE), 'ERR_RATE_LIMIT_RATE');
    }
  });

  it('still bounds each part: a limit up to 2^50, a period up to 2^40 ms', () => {
    expect(
      resolvePolicy({ rate: { limit: 2 ** 50, periodMs: 2 ** 40 }, algorithm: 'fixed-window' }),
    ).toMatchObject({ limit: 2 ** 50 });
    for (const rate of [
      { limit: 2 ** 50 + 1, periodMs: 2 },
      { limit: 2 ** 20, periodMs: 2 ** 40 + 1 },
    ]) {
      expectCode(rejected({ rate, algorithm: 'fixed-window' }, WHERE), 'ERR_RATE_LIMIT_RATE');
    }
  });
});

describe('resolvePolicy: algorithm', () => {
  it.each(['leaky-bucket', 'TOKEN-BUCKET', ''])(
    'rejects the unknown algorithm %p, listing the valid ones',
    (algorithm) => {
      const error = rejected({ rate: '10/s', algorithm: algorithm as Algorithm }, WHERE);
      expectCode(error, 'ERR_RATE_LIMIT_ALGORITHM');
      expect(error.message).toContain(`unknown algorithm ${JSON.stringify(algorithm)}`);
      expect(error.message).toContain(
        'fixed-window, sliding-window, sliding-log, token-bucket, gcra',
      );
    },
  );
});

describe('resolvePolicy: sliding-log', () => {
  it('takes a limit of up to 10,000 (its log size), and fails above, naming the policy', () => {
    expect(resolvePolicy({ rate: '10000/h', algorithm: 'sliding-log' })).toMatchObject({
      limit: 10_000,
      periodMs: 3_600_000,
      algorithm: 'sliding-log',
      capacity: 10_000,
    });
    const error = rejected({ name: 'big', rate: '10001/h', algorithm: 'sliding-log' }, WHERE);
    expectCode(error, 'ERR_RATE_LIMIT_LOG_SIZE');
    expect(error.message).toContain('limit 10001 in policy "big"');
  });

  it('has no burst', () => {
    const error = rejected({ rate: '10/s', algorithm: 'sliding-log', burst: 20 }, WHERE);
    expectCode(error, 'ERR_RATE_LIMIT_BURST');
  });
});

describe('resolvePolicy: name', () => {
  it.each(['', 'a b', 'a:b', 'x'.repeat(65), '{x}', 'a\nb', 'é'])(
    'rejects the name %p with ERR_RATE_LIMIT_NAME',
    (name) => {
      const error = rejected({ rate: '10/s', name }, WHERE);
      expectCode(error, 'ERR_RATE_LIMIT_NAME');
      expect(error.message).toContain(`invalid policy name ${JSON.stringify(name)}`);
    },
  );

  it('rejects a non-string name with ERR_RATE_LIMIT_NAME', () => {
    expectCode(rejected({ rate: '10/s', name: 42 }, WHERE), 'ERR_RATE_LIMIT_NAME');
  });

  it.each(['burst', 'daily', 'a.b-c_D9', 'x'.repeat(64)])('accepts the name %p', (name) => {
    expect(resolvePolicy({ rate: '10/s', name }).name).toBe(name);
  });
});

describe('resolvePolicy: scope', () => {
  it.each(['', 'a:b', 'a b', '{a}', 'x'.repeat(129)])(
    'rejects the scope %p with ERR_RATE_LIMIT_SCOPE',
    (scope) => {
      const error = rejected({ rate: '10/s', scope }, WHERE);
      expectCode(error, 'ERR_RATE_LIMIT_SCOPE');
      expect(error.message).toContain(`invalid scope ${JSON.stringify(scope)}`);
    },
  );

  it.each(['ReportsController.export', 'auth', 'api/v1', 'x'.repeat(128)])(
    'accepts the scope %p',
    (scope) => {
      expect(resolvePolicy({ rate: '10/s', scope }).scope).toBe(scope);
    },
  );

  it('has no scope property when none is given', () => {
    expect(Object.hasOwn(resolvePolicy({ rate: '10/s' }), 'scope')).toBe(false);
  });
});

describe('resolvePolicy: static cost', () => {
  it.each([
    [-1, '-1'],
    [1.5, '1.5'],
    [NaN, 'NaN'],
    ['2', '"2"'],
    [Infinity, 'Infinity'],
  ])('rejects cost %p with ERR_RATE_LIMIT_COST', (cost, quoted) => {
    const error = rejected({ rate: '10/s', cost }, WHERE);
    expectCode(error, 'ERR_RATE_LIMIT_COST');
    expect(error.message).toContain(`invalid cost ${quoted} for policy "default"`);
  });

  it('rejects a cost greater than the capacity: it could never be admitted', () => {
    const error = rejected({ rate: '10/s', cost: 11 }, WHERE);
    expectCode(error, 'ERR_RATE_LIMIT_COST');
    expect(error.message).toBe(
      'cost 11 for policy "default" exceeds its capacity 10: it could never be admitted ' +
        `(in ${WHERE}) [ERR_RATE_LIMIT_COST] (see docs/reference/errors.md#err_rate_limit_cost in the nest-rate-limit package)`,
    );
  });

  it('rejects a cost greater than a burst below the limit', () => {
    const error = rejected({ rate: '10/s', burst: 4, cost: 5 }, WHERE);
    expectCode(error, 'ERR_RATE_LIMIT_COST');
    expect(error.message).toContain('exceeds its capacity 4');
  });

  it.each(['fixed-window', 'sliding-window'] as const)(
    'rejects a cost above the limit for %s',
    (algorithm) => {
      const error = rejected({ rate: '10/s', algorithm, cost: 11 }, WHERE);
      expectCode(error, 'ERR_RATE_LIMIT_COST');
      expect(error.message).toContain('could never be admitted');
    },
  );

  it('accepts a cost equal to the capacity', () => {
    expect(resolvePolicy({ rate: '10/s', cost: 10 }).cost).toBe(10);
    expect(resolvePolicy({ rate: '10/s', burst: 30, cost: 30 }).cost).toBe(30);
    expect(resolvePolicy({ rate: '10/s', algorithm: 'fixed-window', cost: 10 }).cost).toBe(10);
  });

  it('accepts a cost above the limit but within a larger burst', () => {
    const policy = resolvePolicy({ rate: '10/s', algorithm: 'gcra', burst: 30, cost: 25 });
    expect(policy.cost).toBe(25);
    expect(policy.capacity).toBe(30);
  });

  it('accepts cost 0 (a peek)', () => {
    expect(resolvePolicy({ rate: '10/s', cost: 0 }).cost).toBe(0);
  });
});

describe('resolvePolicy: where', () => {
  const cases: [string, unknown, RateLimitErrorCode][] = [
    ['rate', { rate: '100/x' }, 'ERR_RATE_LIMIT_RATE'],
    ['missing rate', {}, 'ERR_RATE_LIMIT_RATE'],
    ['not an object', null, 'ERR_RATE_LIMIT_POLICY_OPTION'],
    ['name', { rate: '1/s', name: 'a b' }, 'ERR_RATE_LIMIT_NAME'],
    ['algorithm', { rate: '1/s', algorithm: 'leaky' }, 'ERR_RATE_LIMIT_ALGORITHM'],
    ['burst type', { rate: '1/s', burst: 0 }, 'ERR_RATE_LIMIT_BURST'],
    [
      'burst on a window',
      { rate: '1/s', algorithm: 'fixed-window', burst: 2 },
      'ERR_RATE_LIMIT_BURST',
    ],
    ['scope', { rate: '1/s', scope: 'a:b' }, 'ERR_RATE_LIMIT_SCOPE'],
    ['cost type', { rate: '1/s', cost: -1 }, 'ERR_RATE_LIMIT_COST'],
    ['cost above capacity', { rate: '1/s', cost: 2 }, 'ERR_RATE_LIMIT_COST'],
  ];

  it.each(cases)('names where it came from in a %s error', (_label, input, code) => {
    expectCode(rejected(input, WHERE), code);
  });

  it.each(cases)('names no place in a %s error when none is given', (_label, input, code) => {
    const error = rejected(input, undefined);
    expect(error.code).toBe(code);
    expect(error.where).toBeUndefined();
    expect(error.message).not.toContain('(in ');
  });
});

describe('concurrency policies ({ concurrent, leaseMs })', () => {
  it('resolve to limit = slots, periodMs = leaseMs (default 30 s), algorithm "concurrency"', () => {
    expect(resolvePolicy({ name: 'inflight', concurrent: 5, leaseMs: 1500 })).toMatchObject({
      name: 'inflight',
      limit: 5,
      capacity: 5,
      periodMs: 1500,
      leaseMs: 1500,
      algorithm: 'concurrency',
    });
    expect(resolvePolicy({ concurrent: 1 }).leaseMs).toBe(30_000);
  });

  it.each([
    [{ concurrent: 0 }, 'invalid concurrent 0'],
    [{ concurrent: 2.5 }, 'invalid concurrent 2.5'],
    [{ concurrent: '5' }, 'invalid concurrent "5"'],
    [{ concurrent: 5, leaseMs: 0 }, 'invalid leaseMs 0'],
    [{ concurrent: 5, leaseMs: '30s' }, 'invalid leaseMs "30s"'],
    [{ concurrent: 5, rate: '5/m' }, 'rate "5/m" does not apply to a concurrency limit'],
    [{ concurrent: 5, block: '15m' }, 'block "15m" does not apply to a concurrency limit'],
  ])('%j is refused at definition, quoting the value and where', (input, message) => {
    const error = rejected({ name: 'inflight', ...input }, WHERE);
    expectCode(error, 'ERR_RATE_LIMIT_CONCURRENCY');
    expect(error.message).toContain(message);
    expect(error.message).toContain('policy "inflight"');
  });
});
