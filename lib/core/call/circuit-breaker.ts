import { quote, RateLimitConfigError } from '../errors.js';

/** Options of the circuit breaker in front of the store. */
export interface CircuitBreakerOptions {
  /** Consecutive failed store calls (errors or timeouts) that open the circuit. Default 5. */
  failureThreshold?: number;
  /** How long, in **ms**, an open circuit skips the store before one probe call. Default 2000. */
  cooldownMs?: number;
}

/** `closed`: calls go through. `open`: calls are skipped. `half-open`: one probe is in flight. */
export type CircuitState = 'closed' | 'open' | 'half-open';

/**
 * The classic three-state circuit breaker: a dead Redis costs one fast failure per request
 * instead of one timeout per request, and is probed again after a cool-down.
 */
export class CircuitBreaker {
  private failures = 0;
  private openedAt = 0;
  private current: CircuitState = 'closed';
  private readonly threshold: number;
  private readonly cooldownMs: number;

  /** @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION` for a threshold or cool-down that is not a positive integer */
  constructor(
    options: CircuitBreakerOptions = {},
    private readonly clock: () => number = Date.now,
  ) {
    this.threshold = positive(options.failureThreshold ?? 5, 'failureThreshold');
    this.cooldownMs = positive(options.cooldownMs ?? 2000, 'cooldownMs');
  }

  get state(): CircuitState {
    return this.current;
  }

  /** Whether a call may go to the store now. In `open` past the cool-down, lets one probe through. */
  tryAcquire(): boolean {
    if (this.current === 'closed') return true;
    // A probe that never settles (a store call without timeout) must not hold the circuit
    // half-open for ever: after another cool-down, probe again.
    if (this.clock() - this.openedAt >= this.cooldownMs) {
      this.current = 'half-open';
      this.openedAt = this.clock();
      return true;
    }
    return false;
  }

  succeeded(): void {
    this.failures = 0;
    this.current = 'closed';
  }

  failed(): void {
    this.failures++;
    if (this.current === 'half-open' || this.failures >= this.threshold) {
      this.current = 'open';
      this.openedAt = this.clock();
    }
  }
}

function positive(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid circuitBreaker.${name} ${quote(value)}: expected an integer >= 1`,
      'RateLimiter',
    );
  }
  return value;
}
