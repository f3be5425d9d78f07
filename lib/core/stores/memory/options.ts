import { quote, RateLimitConfigError } from '../../errors.js';

/** `maxKeys` by default: about 100 MB of heap at about 500 bytes per key. */
export const DEFAULT_MAX_KEYS = 200_000;

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /** Current time in **ms** since the epoch. Default `Date.now`; inject one in tests. */
  clock?: () => number;
  /**
   * Most keys kept at once (default 200,000). When full, expired keys are dropped first
   * (one sweep batch); failing that, the key written least recently, which forgets that
   * identity's spending: size it above your active identities times their routes.
   *
   * Each key holds about 500 bytes of heap (measured: 438 B for 37-character
   * `rl:{ip:…}:…:tb` keys, 494 B for the throttler drop-in's 100-character keys; the
   * module default's are 24 characters now; longer scopes and names add their length), so
   * the default bounds the store at
   * about 100 MB, room for the app in a 512 MB container; 1,000,000 keys take about 500 MB.
   */
  maxKeys?: number;
  /** How often, in **ms**, a slice of the keys is checked for expiry (default 1000; 0 = never, call {@link MemoryStore.sweep}). */
  sweepIntervalMs?: number;
  /** Keys checked per sweep (default 10,000), so one sweep never blocks the event loop for long. */
  sweepBatch?: number;
}

/**
 * The settings of `options`, with their defaults: `every` is the sweep interval in **ms**.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_OPTION` for a non-positive `maxKeys` or
 *   `sweepBatch`, or a `sweepIntervalMs` below 0 or above 2^31-1
 */
export function memoryStoreSettings(options: MemoryStoreOptions): {
  clock: () => number;
  maxKeys: number;
  sweepBatch: number;
  every: number;
} {
  const maxKeys = positive(options.maxKeys ?? DEFAULT_MAX_KEYS, 'maxKeys');
  const sweepBatch = positive(options.sweepBatch ?? 10_000, 'sweepBatch');
  const every = options.sweepIntervalMs ?? 1000;
  // Timers turn a delay above 2^31-1 ms into 1 ms, so larger values are refused.
  if (!Number.isSafeInteger(every) || every < 0 || every > 2 ** 31 - 1) {
    throw optionError('sweepIntervalMs', every);
  }
  return { clock: options.clock ?? Date.now, maxKeys, sweepBatch, every };
}

function positive(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) throw optionError(name, value);
  return value;
}

function optionError(name: string, value: unknown): RateLimitConfigError {
  return new RateLimitConfigError(
    'ERR_RATE_LIMIT_STORE_OPTION',
    `invalid MemoryStore option ${name}: ${quote(value)}`,
    'MemoryStore',
  );
}
