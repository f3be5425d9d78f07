import { Logger } from '@nestjs/common';

/**
 * Log events with stable names (`rate_limit.backend_error`, `rate_limit.shadow_blocked`,
 * `rate_limit.config_error`). Noisy kinds are logged at most once per interval, with the
 * count of what was held back, so an outage writes one line per 10 s, not one per request.
 */
export class RateLimitEvents {
  private readonly last = new Map<string, { at: number; held: number }>();

  constructor(
    private readonly logger: Logger = new Logger('RateLimit'),
    private readonly intervalMs = 10_000,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Logs `event` for `kind` unless it was logged less than `intervalMs` ago. */
  throttled(event: string, kind: string, detail: Record<string, unknown>): void {
    const now = this.clock();
    const key = `${event}:${kind}`;
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.intervalMs) {
      seen.held++;
      return;
    }
    this.last.set(key, { at: now, held: 0 });
    this.logger.warn(
      `${event} ${JSON.stringify({ kind, count: 1 + (seen?.held ?? 0), ...detail })}`,
    );
  }

  /** Logs every occurrence. */
  log(event: string, detail: Record<string, unknown>): void {
    this.logger.warn(`${event} ${JSON.stringify(detail)}`);
  }
}
