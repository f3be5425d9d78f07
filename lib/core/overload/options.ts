import { quote, RateLimitConfigError } from '../errors.js';
import {
  isPriority,
  PRIORITIES,
  type AdaptiveLimitOptions,
  type AdmissionOptions,
  type OverloadOptions,
  type OverloadPoolOptions,
  type Priority,
} from './types.js';

/** One pool's settings with every default filled in. */
export interface PoolSettings {
  readonly initialLimit: number;
  readonly minLimit: number;
  readonly maxLimit: number;
  readonly windowMs: number;
  readonly smoothing: number;
  readonly rttTolerance: number;
  readonly longWindow: number;
  readonly headroom: (limit: number) => number;
  /** `Infinity` when the event loop is not watched. */
  readonly maxEventLoopDelayMs: number;
  readonly eventLoopBackoff: number;
  /** `Infinity` when the loop's turns are not timed. */
  readonly maxTurnMs: number;
  readonly criticalCap: number;
  readonly queueMs: number;
  readonly maxQueued: number;
  readonly leaseMs: number;
}

/** The `overload` option with every default filled in. */
export interface OverloadSettings {
  readonly defaultPriority: Priority;
  readonly retryAfterSeconds: number;
  /** The process's pool. */
  readonly pool: PoolSettings;
  /** The named pools. */
  readonly pools: ReadonlyMap<string, PoolSettings>;
  /** Whether any pool watches the event loop. */
  readonly watchesEventLoop: boolean;
}

const sqrt = (limit: number) => Math.sqrt(limit);

/**
 * `minLimit`'s default: the calls an idle process admits at once. An idle process's limit
 * is at its floor (the app-limited cap), so the floor is the burst a web server takes from
 * cold: a page's fan-out, a client's retry storm, a batch job's first requests. 50 admits
 * such bursts of a few tens with room to spare; a process whose calls queue on a small
 * resource (a database pool of 4) sets it near that resource's size instead.
 */
const DEFAULT_MIN_LIMIT = 50;

/** `maxTurnMs`'s default, in **ms**. */
const DEFAULT_MAX_TURN_MS = 5;

/**
 * The `overload` option checked, with its defaults; undefined when it is off (`undefined`
 * or `false`).
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OVERLOAD_OPTION`, naming the setting and its value
 */
export function overloadSettings(
  option: unknown,
  where = 'RateLimitModule options',
): OverloadSettings | undefined {
  if (option === undefined || option === false) return undefined;
  const given: OverloadOptions = option === true ? {} : (option as OverloadOptions);
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    fail('overload', option, 'true, false or an object of OverloadOptions', where);
  }
  const { defaultPriority = 'normal', retryAfterSeconds = 1, pools } = given;
  if (!isPriority(defaultPriority)) {
    fail('overload.defaultPriority', defaultPriority, `one of ${PRIORITIES.join(', ')}`, where);
  }
  integer('overload.retryAfterSeconds', retryAfterSeconds, 1, 3600, where);
  const pool = poolSettings(given, undefined, 'overload', where);
  const named = new Map<string, PoolSettings>();
  if (pools !== undefined) {
    if (typeof pools !== 'object' || pools === null || Array.isArray(pools)) {
      fail('overload.pools', pools, 'an object of pools by name', where);
    }
    for (const [name, p] of Object.entries(pools)) {
      if (typeof p !== 'object' || p === null || Array.isArray(p)) {
        fail(`overload.pools.${name}`, p, 'an object of pool settings', where);
      }
      named.set(name, poolSettings(p, given, `overload.pools.${name}`, where));
    }
  }
  const all = [pool, ...named.values()];
  return {
    defaultPriority,
    retryAfterSeconds,
    pool,
    pools: named,
    watchesEventLoop: all.some((p) => p.maxEventLoopDelayMs !== Infinity),
  };
}

function poolSettings(
  own: OverloadPoolOptions | OverloadOptions,
  inherited: OverloadOptions | undefined,
  at: string,
  where: string,
): PoolSettings {
  type Key = keyof (AdaptiveLimitOptions & AdmissionOptions);
  const mine = own as AdaptiveLimitOptions & AdmissionOptions;
  const get = <K extends Key>(key: K) =>
    mine[key] !== undefined ? mine[key] : (inherited as typeof mine | undefined)?.[key];
  if (inherited !== undefined && mine.windowMs !== undefined)
    fail(
      `${at}.windowMs`,
      mine.windowMs,
      "nothing: a pool's windows are the process's windowMs",
      where,
    );
  // A floor left to its default stays within a ceiling or a start that is set lower.
  const minLimit =
    get('minLimit') ?? lowest(DEFAULT_MIN_LIMIT, get('maxLimit'), get('initialLimit'));
  const maxLimit = get('maxLimit') ?? 1000;
  // A pool that sets its own bounds takes the inherited start within them.
  const initialLimit =
    mine.initialLimit ?? Math.min(maxLimit, Math.max(minLimit, get('initialLimit') ?? 20));
  integer(`${at}.minLimit`, minLimit, 1, 1_000_000, where);
  integer(
    `${at}.maxLimit`,
    maxLimit,
    minLimit,
    1_000_000,
    where,
    `an integer from minLimit (${minLimit}) to 1,000,000`,
  );
  integer(
    `${at}.initialLimit`,
    initialLimit,
    minLimit,
    maxLimit,
    where,
    `an integer from minLimit (${minLimit}) to maxLimit (${maxLimit})`,
  );
  const windowMs = get('windowMs') ?? 100;
  integer(`${at}.windowMs`, windowMs, 10, 60_000, where);
  const smoothing = get('smoothing') ?? 0.2;
  if (!(typeof smoothing === 'number' && smoothing > 0 && smoothing <= 1))
    fail(`${at}.smoothing`, smoothing, 'a number in (0, 1]', where);
  const rttTolerance = get('rttTolerance') ?? 1.5;
  if (!(typeof rttTolerance === 'number' && rttTolerance >= 1 && Number.isFinite(rttTolerance)))
    fail(`${at}.rttTolerance`, rttTolerance, 'a finite number >= 1', where);
  const longWindow = get('longWindow') ?? 600;
  integer(`${at}.longWindow`, longWindow, 2, 1_000_000, where);
  const headroomOption = get('headroom');
  let headroom: (limit: number) => number;
  if (headroomOption === undefined) headroom = sqrt;
  else if (typeof headroomOption === 'function') headroom = headroomOption;
  else if (
    typeof headroomOption === 'number' &&
    headroomOption >= 0 &&
    Number.isFinite(headroomOption)
  )
    headroom = () => headroomOption;
  else
    fail(
      `${at}.headroom`,
      headroomOption,
      'a finite number >= 0 or a function of the limit',
      where,
    );
  const delay = get('maxEventLoopDelayMs') ?? 50;
  if (delay !== false && !(typeof delay === 'number' && delay > 0 && Number.isFinite(delay)))
    fail(`${at}.maxEventLoopDelayMs`, delay, 'a number of ms > 0, or false', where);
  const eventLoopBackoff = get('eventLoopBackoff') ?? 0.9;
  if (!(typeof eventLoopBackoff === 'number' && eventLoopBackoff > 0 && eventLoopBackoff < 1))
    fail(`${at}.eventLoopBackoff`, eventLoopBackoff, 'a number in (0, 1)', where);
  // An event loop not watched is not timed either, unless the budget is set.
  const turn = get('maxTurnMs') ?? (delay === false ? false : DEFAULT_MAX_TURN_MS);
  if (turn !== false && !(typeof turn === 'number' && turn > 0 && Number.isFinite(turn)))
    fail(`${at}.maxTurnMs`, turn, 'a number of ms > 0, or false', where);
  const criticalCap = get('criticalCap') ?? 2;
  if (!(typeof criticalCap === 'number' && criticalCap >= 1 && Number.isFinite(criticalCap)))
    fail(`${at}.criticalCap`, criticalCap, 'a finite number >= 1', where);
  const queueMs = get('queueMs') ?? 0;
  integer(`${at}.queueMs`, queueMs, 0, 10_000, where);
  const maxQueued = get('maxQueued') ?? 100;
  integer(`${at}.maxQueued`, maxQueued, 1, 1_000_000, where);
  const leaseMs = get('leaseMs') ?? 60_000;
  integer(
    `${at}.leaseMs`,
    leaseMs,
    1000,
    2 ** 31 - 1,
    where,
    'an integer number of ms from 1,000 to 2^31-1',
  );
  return {
    initialLimit,
    minLimit,
    maxLimit,
    windowMs,
    smoothing,
    rttTolerance,
    longWindow,
    headroom: headroom!,
    maxEventLoopDelayMs: delay === false ? Infinity : delay,
    eventLoopBackoff,
    maxTurnMs: turn === false ? Infinity : turn,
    criticalCap,
    queueMs,
    maxQueued,
    leaseMs,
  };
}

/** The smallest of `fallback` and the integers among `values`. */
function lowest(fallback: number, ...values: unknown[]): number {
  let min = fallback;
  for (const v of values) if (Number.isSafeInteger(v) && (v as number) < min) min = v as number;
  return min;
}

function integer(
  name: string,
  value: unknown,
  min: number,
  max: number,
  where: string,
  expected = `an integer from ${min.toLocaleString('en-US')} to ${max.toLocaleString('en-US')}`,
): void {
  if (!(Number.isSafeInteger(value) && (value as number) >= min && (value as number) <= max))
    fail(name, value, expected, where);
}

function fail(name: string, value: unknown, expected: string, where: string): never {
  throw new RateLimitConfigError(
    'ERR_RATE_LIMIT_OVERLOAD_OPTION',
    `invalid ${name} ${quote(value)}: expected ${expected}`,
    where,
  );
}
