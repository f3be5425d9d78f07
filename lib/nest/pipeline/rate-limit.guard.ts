import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError } from '../../core/errors.js';
import { decideAfterGuards, RATE_LIMIT_GUARD } from './defer.js';
import type { RequestLike } from '../../http/ip.js';
import { NO_LIMIT, storedDecision, storeOutcome, type RequestOutcome } from './outcome.js';
import type { Route } from '../plan/routes.js';
import { RateLimitRuntime } from '../plan/runtime.js';
import { KillSwitch } from './kill-switch.js';
import { isThenable } from './thenable.js';
import { httpTransport } from '../transports/http.js';
import { adapterOf, transportOf } from '../transports/registry.js';
import type { Transport } from '../transports/transport.js';

/** The outcome of a call left alone (kill switch off, or skipped): no headers, nothing later. */
const SKIPPED: RequestOutcome = Object.freeze({ allowed: true, headers: {} });

/** What `canActivate` answers for a call it leaves alone. */
const ADMIT = Promise.resolve(true);

/** The status `settle` is given for a request the route's own guards admitted (see `count`). */
const ADMITTED = 200;

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

  /**
   * Set at bootstrap on the module's own global guard when the app registers a subclass as
   * a global guard (`APP_GUARD`) too: that subclass decides, with its overrides, and this
   * one admits without a word (else it would decide first and the subclass never would).
   */
  standAside = false;

  private readonly killSwitch = new KillSwitch((error) =>
    this.runtime.reportConfigError('enabled', error),
  );

  canActivate(ctx: ExecutionContext): Promise<boolean> {
    if (this.standAside) return ADMIT;
    const found = transportOf(ctx);
    if (found === undefined) return ADMIT;
    // A promise only the first time a transport with an optional peer is met.
    if (isThenable(found)) {
      return Promise.resolve(found).then(
        (transport) => this.activate(ctx, transport),
        (error: unknown) => this.unreadable(ctx, error),
      );
    }
    return this.activate(ctx, found);
  }

  private activate(ctx: ExecutionContext, transport: Transport): Promise<boolean> {
    let carrier: object | undefined;
    let stored: RequestOutcome | Promise<RequestOutcome> | undefined;
    let request: RequestLike | undefined;
    try {
      carrier = transport.carrier(ctx);
      if (carrier === undefined) return ADMIT;
      stored = storedDecision(carrier);
      if (stored === undefined) request = transport.request(ctx);
    } catch (error) {
      return Promise.resolve(this.unreadable(ctx, error));
    }
    if (stored !== undefined) return this.decidedBefore(ctx, stored);
    // Stored while it is being decided: calls that share the carrier at once (the items of a
    // GraphQL list under one field) wait for this decision rather than count again.
    const deciding = this.decide(ctx, transport, request, carrier);
    storeOutcome(carrier, deciding);
    const on = carrier;
    return deciding.then((outcome) => {
      storeOutcome(on, outcome);
      if (outcome === SKIPPED) return true;
      // Before `send`, which throws a refusal: slots taken before a later refusal still end.
      if (outcome.release) transport.onDone?.(ctx, outcome.release);
      this.send(ctx, transport, outcome);
      if (outcome.settle) transport.onSent?.(ctx, outcome.settle);
      return true;
    });
  }

  /** A transport that cannot read this context leaves it unlimited rather than fail it. */
  private unreadable(ctx: ExecutionContext, error: unknown): boolean {
    this.runtime.reportConfigError(`transport ${ctx.getType()}`, error);
    return true;
  }

  /**
   * The policies that need the user, on a route with guards of its own (see
   * `after-guards.ts`): spent now against the client's address, as a request those guards
   * might refuse, then given back and decided per user once they have admitted it.
   * @returns the outcome to answer now
   */
  private async waitForRouteGuards(
    ctx: ExecutionContext,
    transport: Transport,
    request: RequestLike | undefined,
    carrier: object,
    first: RequestOutcome,
    later: Route,
  ): Promise<RequestOutcome> {
    const held = await this.runtime.evaluateAsAddress(ctx, request, later);
    if (!held.allowed) return this.runtime.combine(first, held);
    decideAfterGuards(carrier, (after) => {
      // The guards admitted it: not a refused request after all.
      held.settle?.(ADMITTED);
      return this.decideLater(after, transport, carrier, first, later);
    });
    return first;
  }

  /**
   * The policies that waited for the route's own guards (authentication): decided now that
   * the user is known, with headers over every policy of the request.
   */
  private async decideLater(
    ctx: ExecutionContext,
    transport: Transport,
    carrier: object,
    first: RequestOutcome,
    route: Route,
  ): Promise<boolean> {
    let second = NO_LIMIT;
    try {
      second = await this.runtime.evaluateRoute(ctx, transport.request(ctx), route);
    } catch (error) {
      if (error instanceof RateLimitConfigError) throw error;
      this.runtime.reportConfigError(`transport ${transport.type}`, error);
    }
    const outcome = this.runtime.combine(first, second);
    if (outcome.allowed && second.settle) transport.onSent?.(ctx, second.settle);
    if (second.release) transport.onDone?.(ctx, second.release);
    storeOutcome(carrier, outcome);
    this.send(ctx, transport, outcome);
    return true;
  }

  /**
   * Sends the headers, then refuses when the outcome says so. The headers go first, so that
   * a `refuse` of your own keeps `Retry-After` and the rate-limit headers; and on an
   * admitted request, so that a 401 from a later guard still carries them.
   */
  private send(ctx: ExecutionContext, transport: Transport, outcome: RequestOutcome): void {
    if (outcome === NO_LIMIT) return;
    try {
      transport.setHeaders(ctx, outcome.headers);
    } catch (error) {
      this.runtime.reportConfigError(`transport ${transport.type}`, error);
    }
    if (!outcome.allowed) this.refuse(ctx, outcome);
  }

  /**
   * The outcome of one call: {@link SKIPPED} when the kill switch is off or the call is
   * skipped. Rejects only with the `RateLimitConfigError` of a route with invalid policies.
   */
  private decide(
    ctx: ExecutionContext,
    transport: Transport,
    request: RequestLike | undefined,
    carrier: object,
  ): Promise<RequestOutcome> {
    const { enabled } = this.runtime.options;
    if (enabled === false) return Promise.resolve(SKIPPED);
    if (typeof enabled === 'function') return this.decideWhenOn(ctx, transport, request, carrier);
    let skip: boolean | Promise<boolean>;
    let first: Promise<RequestOutcome>;
    try {
      // The allow-list before `skip`, and apart from `shouldSkip`: a subclass that overrides
      // it keeps the list.
      skip = this.runtime.allowList?.allows(request) === true || this.shouldSkip(ctx);
      if (skip === true) return Promise.resolve(SKIPPED);
      if (skip !== false) return this.decideWhenOn(ctx, transport, request, carrier, skip);
      first = this.runtime.evaluate(ctx, request);
    } catch (error) {
      return this.undecided(transport, error);
    }
    // No async function on this path: each would add promises and microtask turns.
    return first.then(
      (outcome) => this.afterFirst(ctx, transport, request, carrier, outcome),
      (error: unknown) => this.undecided(transport, error),
    );
  }

  /**
   * {@link RateLimitGuard.decide} with an `enabled` function, or a `skip` that answers later
   * (`asked`: its pending answer, so that `skip` is asked once per call).
   */
  private async decideWhenOn(
    ctx: ExecutionContext,
    transport: Transport,
    request: RequestLike | undefined,
    carrier: object,
    asked?: Promise<boolean>,
  ): Promise<RequestOutcome> {
    const { enabled } = this.runtime.options;
    if (typeof enabled === 'function' && !(await this.killSwitch.on(enabled))) return SKIPPED;
    let first: RequestOutcome;
    try {
      const skip =
        asked ?? (this.runtime.allowList?.allows(request) === true || this.shouldSkip(ctx));
      if (typeof skip === 'boolean' ? skip : await skip) return SKIPPED;
      first = await this.runtime.evaluate(ctx, request);
    } catch (error) {
      return this.undecided(transport, error);
    }
    return this.afterFirst(ctx, transport, request, carrier, first);
  }

  /** After the first decision: the policies that wait for the route's own guards, if any. */
  private afterFirst(
    ctx: ExecutionContext,
    transport: Transport,
    request: RequestLike | undefined,
    carrier: object,
    first: RequestOutcome,
  ): RequestOutcome | Promise<RequestOutcome> {
    if (!first.allowed) return first;
    try {
      // Looked up first: most routes have nothing waiting, and pay no further await.
      const later = this.runtime.afterGuardsOf(ctx);
      if (later === undefined) return first;
      return this.waitForRouteGuards(ctx, transport, request, carrier, first, later).catch(
        (error: unknown) => this.undecided(transport, error),
      );
    } catch (error) {
      return this.undecided(transport, error);
    }
  }

  /**
   * A route with invalid policies fails as at bootstrap (rethrown); anything else comes from
   * a context the runtime cannot read (no class or handler), which stays unlimited.
   */
  private undecided(transport: Transport, error: unknown): Promise<RequestOutcome> {
    if (error instanceof RateLimitConfigError) return Promise.reject(error);
    this.runtime.reportConfigError(`transport ${transport.type}`, error);
    return Promise.resolve(NO_LIMIT);
  }

  /**
   * A call whose carrier was decided before (a handler guarded twice), or is being decided
   * (another item of the same GraphQL list field): counted once, answered alike; the headers
   * were sent by the call that decided.
   */
  private async decidedBefore(
    ctx: ExecutionContext,
    stored: RequestOutcome | Promise<RequestOutcome>,
  ): Promise<boolean> {
    const outcome = isThenable(stored) ? await stored : stored;
    if (!outcome.allowed) this.refuse(ctx, outcome);
    return true;
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
   * Raises the refusal through the call's transport (on HTTP: an `HttpException` with the 429
   * or 503 body). Override it to answer otherwise: the rate-limit headers and `Retry-After`
   * are already set when it is called (`outcome.headers` holds them too).
   * @throws always
   */
  protected refuse(ctx: ExecutionContext, outcome: RequestOutcome): never {
    return (adapterOf(ctx) ?? httpTransport).refuse(ctx, outcome);
  }
}

// Tells a route's own guards from ours, subclasses included (see after-guards.ts).
Object.defineProperty(RateLimitGuard.prototype, RATE_LIMIT_GUARD, { value: true });
