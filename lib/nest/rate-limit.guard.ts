import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError } from '../core/errors.js';
import type { RequestLike } from '../http/ip.js';
import { NO_LIMIT, storedOutcome, storeOutcome, type RequestOutcome } from './outcome.js';
import { RateLimitRuntime } from './runtime.js';
import { isThenable } from './thenable.js';
import { httpTransport } from './transports/http.js';
import { adapterOf, transportOf } from './transports/registry.js';
import type { Transport } from './transports/transport.js';

/** Longest wait for an async `enabled` function, in ms. */
const ENABLED_WAIT_MS = 100;

/**
 * Decides each call of a limited handler against its route's policies in one limiter call,
 * stores the outcome on the call's carrier (the HTTP request), sends the rate-limit headers,
 * and refuses through the call's transport: on HTTP with 429 (or 503 for a fail-closed
 * route whose store is down). Registered globally by `RateLimitModule`; with
 * `global: false`, use `@UseGuards(RateLimitGuard)`. A call guarded twice is counted once.
 * Contexts of a transport without an adapter (`lib/nest/transports/`) pass untouched, and
 * no context gets a TypeError from the guard.
 *
 * Extension points for subclasses: {@link RateLimitGuard.shouldSkip} and
 * {@link RateLimitGuard.refuse}.
 */
@Injectable()
export class RateLimitGuard implements CanActivate {
  constructor(@Inject(RateLimitRuntime) protected readonly runtime: RateLimitRuntime) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const found = transportOf(ctx);
    if (found === undefined) return true;
    let transport: Transport;
    let carrier: object | undefined;
    let request: RequestLike | undefined;
    try {
      // A promise only the first time a transport with an optional peer is met.
      transport = isThenable(found) ? await found : found;
      carrier = transport.carrier(ctx);
      if (carrier === undefined || storedOutcome(carrier) !== undefined) return true;
      request = transport.request(ctx);
    } catch (error) {
      // A transport that cannot read this context leaves it unlimited rather than fail it.
      this.runtime.reportConfigError(`transport ${ctx.getType()}`, error);
      return true;
    }
    const { enabled } = this.runtime.options;
    if (enabled === false || (typeof enabled === 'function' && !(await this.switchedOn(enabled))))
      return true;
    // The allow-list before `skip`, and apart from `shouldSkip`: a subclass that overrides
    // it keeps the list. Awaited only when it is a promise: a microtask less per request.
    const skip = this.runtime.allowList?.allows(request) === true || this.shouldSkip(ctx);
    let outcome = NO_LIMIT;
    if (!(typeof skip === 'boolean' ? skip : await skip)) {
      try {
        outcome = await this.runtime.evaluate(ctx, request);
      } catch (error) {
        // A route with invalid policies fails as at bootstrap; anything else comes from a
        // context the runtime cannot read (no class or handler), which stays unlimited.
        if (error instanceof RateLimitConfigError) throw error;
        this.runtime.reportConfigError(`transport ${transport.type}`, error);
      }
    }
    storeOutcome(carrier, outcome);
    if (!outcome.allowed) this.refuse(ctx, outcome);
    // Sent here too, not only by the interceptor: a later guard (authentication) may
    // refuse the request, and its 401 still counted.
    try {
      transport.setHeaders(ctx, outcome.headers);
    } catch (error) {
      this.runtime.reportConfigError(`transport ${transport.type}`, error);
    }
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

  /**
   * Raises the refusal through the call's transport (on HTTP: sets its headers, since the
   * interceptor does not run, and throws an `HttpException` with the 429 or 503 body).
   * @throws always
   */
  protected refuse(ctx: ExecutionContext, outcome: RequestOutcome): never {
    return (adapterOf(ctx) ?? httpTransport).refuse(ctx, outcome);
  }
}
