import type { ExecutionContext } from '@nestjs/common';
import type { AllowList } from '../../../http/allow-list.js';
import type { RequestLike } from '../../../http/ip.js';
import type { RateLimitModuleOptions } from '../../module/options.js';
import type { RateLimitEvents } from '../../observability/events.js';
import { isThenable } from '../thenable.js';

/** Longest wait for an async `enabled` function, in **ms**. */
const ENABLED_WAIT_MS = 100;

/**
 * The gate stage, first on every call: the kill switch (`enabled`), then the allow-list,
 * then `skip`. Answers whether the call is to be decided at all; a call it stops passes
 * untouched (no headers, nothing counted). Used by the guard and by WebSocket connection
 * limits alike.
 */
export class Gate {
  private readonly killSwitch: KillSwitch;

  /** @param allowList the module's `allowList` (clients never limited), parsed once per module */
  constructor(
    private readonly options: RateLimitModuleOptions,
    events: RateLimitEvents,
    private readonly allowList: AllowList | undefined,
  ) {
    this.killSwitch = new KillSwitch((error) => events.configError('enabled', error));
  }

  /** True when `enabled: false`: every call passes, without asking anything else. */
  get off(): boolean {
    return this.options.enabled === false;
  }

  /**
   * Whether the call is limited: the kill switch is on, the client is not on the allow-list,
   * and `skip` (asked last, once) says no. A promise only when `enabled` is a function or
   * `skip` answers later.
   * @throws whatever the allow-list or `skip` throws (the caller leaves the call unlimited)
   */
  passes(
    request: RequestLike | undefined,
    skip: () => boolean | Promise<boolean>,
  ): boolean | Promise<boolean> {
    const { enabled } = this.options;
    if (enabled === false) return false;
    if (typeof enabled === 'function') {
      return this.killSwitch.on(enabled).then((on) => on && this.passesOn(request, skip));
    }
    return this.passesOn(request, skip);
  }

  private passesOn(
    request: RequestLike | undefined,
    skip: () => boolean | Promise<boolean>,
  ): boolean | Promise<boolean> {
    // The allow-list before `skip`, and apart from it: a guard subclass that overrides
    // `shouldSkip` keeps the list.
    if (this.allowList?.allows(request) === true) return false;
    const skipped = skip();
    return isThenable(skipped) ? Promise.resolve(skipped).then((s) => !s) : !skipped;
  }
}

/**
 * The kill switch (`enabled`) as a function: asked before anything else, without Redis.
 * An async answer is awaited 100 ms at most, and never twice at once: while one is
 * pending, calls take the last answer at once, so a stalled flag service neither stalls
 * requests nor piles up calls. A function that throws or rejects counts as on.
 */
export class KillSwitch {
  /** The last answer, for when an answer is slow to come. */
  private last = true;
  /** The call still awaited, if any: one at a time. */
  private asking: Promise<boolean> | undefined;

  /** @param failed logs an `enabled` that threw or rejected (`rate_limit.config_error`) */
  constructor(private readonly failed: (error: unknown) => void) {}

  /** Whether limits apply now, per `enabled`. */
  async on(enabled: () => boolean | Promise<boolean>): Promise<boolean> {
    if (this.asking) return this.last;
    const failed = (error: unknown) => {
      this.failed(error);
      return (this.last = true);
    };
    let answer: boolean | Promise<boolean>;
    try {
      answer = enabled();
    } catch (error) {
      return failed(error);
    }
    if (!isThenable(answer)) return (this.last = answer !== false);
    const asking = Promise.resolve(answer)
      .then((on) => (this.last = on !== false), failed)
      .finally(() => (this.asking = undefined));
    this.asking = asking;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(this.last), ENABLED_WAIT_MS);
    });
    return Promise.race([asking, late]).finally(() => clearTimeout(timer));
  }
}

/**
 * The module's `skip` for a call: true to leave it alone. A `skip` that throws or rejects
 * skips nothing (and is logged as `rate_limit.config_error`), so a bug there never opens the
 * API. Synchronous when `skip` is.
 */
export function askSkip(
  options: RateLimitModuleOptions,
  events: RateLimitEvents,
  ctx: ExecutionContext,
): boolean | Promise<boolean> {
  const { skip } = options;
  if (!skip) return false;
  const failed = (error: unknown) => {
    events.configError('skip', error);
    return false;
  };
  try {
    const answer = skip(ctx);
    return isThenable(answer)
      ? Promise.resolve(answer).then((skipped) => skipped === true, failed)
      : answer === true;
  } catch (error) {
    return failed(error);
  }
}
