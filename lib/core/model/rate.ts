import { quote, RateLimitConfigError } from '../errors.js';

/** A quota: `limit` units per `periodMs` milliseconds. */
export interface Rate {
  /** Units admitted per period: a positive integer. */
  readonly limit: number;
  /** Length of the period in **milliseconds**: a positive integer. */
  readonly periodMs: number;
}

/** A rate as users write it: `'100/m'`, `'5/10s'`, `'1000/day'`, `'10/500ms'`, or a {@link Rate}. */
export type RateInput = string | Rate;

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  sec: 1_000,
  secs: 1_000,
  second: 1_000,
  seconds: 1_000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
};

// The limit has no sign and no leading zero; the period count is optional.
const RATE_PATTERN = /^([1-9]\d*)\/([1-9]\d*)?([a-z]+)$/;

/**
 * The largest `limit × periodMs` (and `burst × periodMs`) accepted. The algorithms keep
 * fractional state exactly by scaling it to integers of this size; staying below 2^50
 * leaves room for the sums they form while every value stays an exact double (< 2^53),
 * in TypeScript and in Redis Lua alike.
 */
export const MAX_SCALED = 2 ** 50;

/**
 * The longest period, in **ms** (2^40, about 34 years), of a fixed window whose
 * `limit × periodMs` exceeds {@link MAX_SCALED}: a fixed window keeps a count and an end
 * time, never a scaled product, so only each of them has to stay exact (a limit up to
 * 2^50, an end up to 2^40 ms from now), e.g. 1,000,000 per 30 days.
 */
export const MAX_FIXED_WINDOW_PERIOD_MS = 2 ** 40;

/**
 * Parses a rate such as `'100/m'` into `{ limit, periodMs }`.
 *
 * Accepted: `"<limit>/<count?><unit>"` with a positive integer limit, an optional
 * positive integer count, and a unit among `ms`, `s|sec|second`, `m|min|minute`,
 * `h|hour`, `d|day` (plurals accepted), or an object `{ limit, periodMs }` of positive
 * integers.
 *
 * @param input the rate
 * @param where where the rate came from, quoted in the error (e.g. `ReportsController.export`)
 * @param fixedWindow the rate of a fixed window: `limit × periodMs` may exceed 2^50 while
 *   the limit stays at most 2^50 and the period at most {@link MAX_FIXED_WINDOW_PERIOD_MS}
 * @returns the rate, `periodMs` in milliseconds
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_RATE` for anything else, e.g. `'100/x'`,
 *   `'0/m'`, `'-1/m'`, `'1.5/m'`, `'100'`, `''`
 */
export function parseRate(input: RateInput, where?: string, fixedWindow = false): Rate {
  if (typeof input === 'string') {
    const match = RATE_PATTERN.exec(input);
    const unit = match && Object.hasOwn(UNIT_MS, match[3]!) ? UNIT_MS[match[3]!] : undefined;
    if (match && unit !== undefined) {
      const periodMs = Number(match[2] ?? 1) * unit;
      return checkRate(Number(match[1]), periodMs, input, where, fixedWindow);
    }
  } else if (input !== null && typeof input === 'object') {
    return checkRate(input.limit, input.periodMs, input, where, fixedWindow);
  }
  throw new RateLimitConfigError(
    'ERR_RATE_LIMIT_RATE',
    `invalid rate ${quote(input)}: expected "<limit>/<period>" such as '100/m', '5/10s', ` +
      `'1000/day', '10/500ms', or { limit, periodMs } with positive integers`,
    where,
  );
}

function checkRate(
  limit: unknown,
  periodMs: unknown,
  input: unknown,
  where: string | undefined,
  fixedWindow: boolean,
): Rate {
  if (!isPositiveInteger(limit) || !isPositiveInteger(periodMs)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_RATE',
      `invalid rate ${quote(input)}: limit and periodMs must be positive integers`,
      where,
    );
  }
  const fixedWindowFits =
    fixedWindow && limit <= MAX_SCALED && periodMs <= MAX_FIXED_WINDOW_PERIOD_MS;
  if (limit * periodMs > MAX_SCALED && !fixedWindowFits) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_RATE',
      `rate ${quote(input)} is too large: limit × periodMs must not exceed 2^50`,
      where,
    );
  }
  return { limit, periodMs };
}

/** True for an integer >= 1 that is exactly representable. */
export function isPositiveInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1;
}

/** Units {@link formatRate} writes, the largest first. */
const WRITTEN_UNITS: readonly [string, number][] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
  ['ms', 1],
];

/**
 * A rate as a person writes it, in the largest unit that divides its period: `'100/m'`,
 * `'5/10s'`, `'7/1500ms'`. {@link parseRate} reads it back to the same rate.
 */
export function formatRate({ limit, periodMs }: Rate): string {
  const [unit, ms] = WRITTEN_UNITS.find(([, ms]) => periodMs % ms === 0)!;
  const count = periodMs / ms;
  return `${limit}/${count === 1 ? '' : count}${unit}`;
}

const DURATION_PATTERN = /^([1-9]\d*)?([a-z]+)$/;

/**
 * Parses a duration such as `'15m'`, `'30s'`, `'1h'` or `'500ms'` (the units of a rate's
 * period), or a number of **ms**, into **ms**: an integer from 1 to 2^40 (about 34 years).
 *
 * @throws {RateLimitConfigError} with `code` (e.g. `ERR_RATE_LIMIT_BLOCK`) naming `what`
 */
export function parseDurationMs(
  input: unknown,
  code: 'ERR_RATE_LIMIT_BLOCK',
  what: string,
  where?: string,
): number {
  let ms: number | undefined;
  if (typeof input === 'number') ms = input;
  else if (typeof input === 'string') {
    const match = DURATION_PATTERN.exec(input);
    const unit = match && Object.hasOwn(UNIT_MS, match[2]!) ? UNIT_MS[match[2]!] : undefined;
    if (match && unit !== undefined) ms = Number(match[1] ?? 1) * unit;
  }
  if (ms === undefined || !isPositiveInteger(ms) || ms > 2 ** 40) {
    throw new RateLimitConfigError(
      code,
      `invalid ${what} ${quote(input)}: expected a duration such as '15m', '30s', '1h', or a number of ms from 1 to 2^40`,
      where,
    );
  }
  return ms;
}
