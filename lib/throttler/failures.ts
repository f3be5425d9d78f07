import type { Logger } from '@nestjs/common';
import { errorsLink } from '../core/errors-page.js';
import { RateLimitBackendError, RateLimitConfigError } from '../core/errors.js';

/** How often, at most, each kind of failure is logged, in **ms**. */
const LOG_EVERY_MS = 10_000;

/**
 * What the guard answers by admitting the request, logged (each event at most once per
 * 10 s), never by a 500: a store that failed or timed out (`rate_limit.backend_error`), a
 * policy the engine refused to build (`rate_limit.config_error`).
 */
export class ThrottlerFailures {
  private readonly loggedAt = new Map<string, number>();

  /** @param logger the guard's logger, read at each log (a subclass may replace it) */
  constructor(private readonly logger: () => Logger) {}

  /** Whether admitting answers `error` (then logged); false for anything else (rethrow it). */
  admits(error: unknown): boolean {
    if (error instanceof RateLimitBackendError) {
      this.log('rate_limit.backend_error', { message: error.message });
      return true;
    }
    if (error instanceof RateLimitConfigError) {
      this.log('rate_limit.config_error', { message: error.message });
      return true;
    }
    return false;
  }

  private log(event: string, detail: object): void {
    const now = Date.now();
    if (now - (this.loggedAt.get(event) ?? -Infinity) < LOG_EVERY_MS) return;
    this.loggedAt.set(event, now);
    this.logger().warn(
      `${event} ${JSON.stringify({ ...detail, docs: errorsLink(event) })}: admitted`,
    );
  }
}
