import {
  HttpException,
  Inject,
  Injectable,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { outcomeOf, setHeaders, storeOutcome } from './http-context.js';
import { isThenable, RateLimitRuntime, type RequestOutcome } from './runtime.js';

/** Longest wait for an async `enabled` function, in ms. */
const ENABLED_WAIT_MS = 100;

/**
 * Decides each HTTP request against its route's policies in one limiter call, stores the
 * outcome on the request, writes the rate-limit headers, and refuses with 429 (or 503
 * for a fail-closed route whose store is down). Registered globally by `RateLimitModule`;
 * with `global: false`, use `@UseGuards(RateLimitGuard)`. A request guarded twice is
 * counted once. Contexts other than HTTP pass untouched.
 *
 * Extension points for subclasses: {@link RateLimitGuard.shouldSkip} and
 * {@link RateLimitGuard.refuse}.
 */
@Injectable()
export class RateLimitGuard implements CanActivate {
  constructor(@Inject(RateLimitRuntime) protected readonly runtime: RateLimitRuntime) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    if (ctx.getType() !== 'http' || outcomeOf(ctx) !== undefined) return true;
    const { enabled } = this.runtime.options;
    if (enabled === false || (typeof enabled === 'function' && !(await this.switchedOn(enabled))))
      return true;
    // Awaited only when it is a promise: a microtask less per request without `skip`.
    const skip = this.shouldSkip(ctx);
    const outcome = (typeof skip === 'boolean' ? skip : await skip)
      ? { allowed: true, headers: {} }
      : await this.runtime.evaluate(ctx);
    storeOutcome(ctx, outcome);
    if (!outcome.allowed) this.refuse(ctx, outcome);
    // Written here too, not only by the interceptor: a later guard (authentication) may
    // refuse the request, and its 401 still counted.
    setHeaders(ctx, outcome.headers);
    return true;
  }

  /** The last answer of an `enabled` function, for when an answer is slow to come. */
  private lastEnabled = true;
  /** The `enabled` call still awaited, if any: one at a time. */
  private asking: Promise<boolean> | undefined;

  /**
   * The kill switch (`enabled`) as a function: asked before anything else, without Redis.
   * An async answer is awaited 100 ms at most, and never twice at once: while one is
   * pending, requests take the last answer at once, so a stalled flag service neither
   * stalls requests nor piles up calls. A function that throws or rejects counts as on.
   */
  private async switchedOn(enabled: () => boolean | Promise<boolean>): Promise<boolean> {
    if (this.asking) return this.lastEnabled;
    const failed = (error: unknown) => {
      this.runtime.reportConfigError('enabled', error);
      return (this.lastEnabled = true);
    };
    let answer: boolean | Promise<boolean>;
    try {
      answer = enabled();
    } catch (error) {
      return failed(error);
    }
    if (!isThenable(answer)) return (this.lastEnabled = answer !== false);
    const asking = Promise.resolve(answer)
      .then((on) => (this.lastEnabled = on !== false), failed)
      .finally(() => (this.asking = undefined));
    this.asking = asking;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(this.lastEnabled), ENABLED_WAIT_MS);
    });
    return Promise.race([asking, late]).finally(() => clearTimeout(timer));
  }

  /**
   * True to leave this request alone. Default: the module's `skip` option; a `skip` that
   * throws skips nothing (and is logged), so a bug there never opens the API.
   */
  protected shouldSkip(ctx: ExecutionContext): boolean | Promise<boolean> {
    const { skip } = this.runtime.options;
    if (!skip) return false;
    const failed = (error: unknown) => {
      this.runtime.reportConfigError('skip', error);
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

  /** Sends the refusal: sets its headers (the interceptor does not run) and throws. */
  protected refuse(ctx: ExecutionContext, outcome: RequestOutcome): never {
    setHeaders(ctx, outcome.headers);
    throw new HttpException(outcome.refusal!.body, outcome.refusal!.status);
  }
}
