import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError } from '../../core/errors.js';
import type { RequestLike } from '../../http/ip.js';
import { RoutePlanner } from '../plan/planner.js';
import { httpTransport } from '../transports/http.js';
import { adapterOf, transportOf } from '../transports/registry.js';
import type { Transport } from '../transports/transport.js';
import { RATE_LIMIT_GUARD } from './stages/after-route-guards.js';
import type { Call } from './call.js';
import { deliver } from './stages/deliver.js';
import { askSkip, Gate } from './stages/gate.js';
import { identitiesOf } from './stages/identify.js';
import {
  decidedFor,
  forgetOutcome,
  NO_LIMIT,
  storedDecision,
  storeOutcome,
  type RequestOutcome,
} from './outcome.js';
import { shed } from './stages/shed.js';
import { endSlots, forgetSlots, holdSlots } from '../end/slot-hold.js';
import { isThenable } from './thenable.js';

/** The outcome of a call left alone (kill switch off, or skipped): no headers, nothing later. */
const SKIPPED: RequestOutcome = Object.freeze({ allowed: true, headers: {} });

/** The outcome of a call whose route has no policy. */
const NOTHING_TO_DECIDE: Promise<RequestOutcome> = Promise.resolve(NO_LIMIT);

/** What `canActivate` answers for a call it leaves alone. */
const ADMIT = Promise.resolve(true);

/**
 * Decides each call of a limited handler against its route's plan (see
 * docs/reference/request-lifecycle.md): gate → identify → the stages of the plan (one store
 * call; on routes with guards of their own, the deferral) → deliver. Stores the outcome on the call's carrier (the HTTP request), sends the
 * rate-limit headers, and refuses through the call's transport: on HTTP with 429 (or 503 for
 * a fail-closed route whose store is down). Registered globally by `RateLimitModule`; with
 * `global: false`, use `@UseGuards(RateLimitGuard)`. A call guarded twice is counted once.
 * Contexts of a transport without an adapter (`lib/nest/transports/`) pass untouched, and
 * no context gets a TypeError from the guard.
 *
 * Extension points for subclasses: {@link RateLimitGuard.shouldSkip} and
 * {@link RateLimitGuard.refuse}; `this.planner` holds the module's `options`, `limiter` and
 * `events`.
 */
@Injectable()
export class RateLimitGuard implements CanActivate {
  private readonly gate: Gate;

  /**
   * @param planner the module's route plans, with its `options`, `limiter` and `events`
   *   (for a subclass)
   */
  constructor(@Inject(RoutePlanner) protected readonly planner: RoutePlanner) {
    this.gate = new Gate(planner.options, planner.events, planner.allowList);
  }

  /**
   * The module's route plans, with its `options`, `limiter` and `events`.
   * @deprecated use {@link RateLimitGuard.planner}, the same object
   */
  protected get runtime(): RoutePlanner {
    return this.planner;
  }

  /**
   * Set at bootstrap on the module's own global guard when the app registers a subclass as
   * a global guard (`APP_GUARD`) too: that subclass decides, with its overrides, and this
   * one admits without a word (else it would decide first and the subclass never would).
   */
  standAside = false;

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
      if (stored === undefined) request = transport.request(ctx, this.planner.events);
    } catch (error) {
      return Promise.resolve(this.unreadable(ctx, error));
    }
    if (stored !== undefined) {
      if (decidedFor(carrier, ctx.getClass(), ctx.getHandler()))
        return this.decidedBefore(ctx, stored);
      return this.redecide(ctx, transport, carrier, stored);
    }
    // Stored while it is being decided: calls that share the carrier at once (the items of a
    // GraphQL list under one field) wait for this decision rather than count again.
    const { overload } = this.runtime;
    const deciding =
      overload === undefined
        ? this.decide(ctx, transport, request, carrier)
        : // Admission first: a shed call spends no rate-limit budget.
          shed(overload, ctx, transport, () => this.decide(ctx, transport, request, carrier));
    storeOutcome(carrier, deciding);
    const on = carrier;
    return deciding.then((outcome) => {
      storeOutcome(on, outcome);
      if (outcome === SKIPPED) return true;
      if (outcome.release) {
        holdSlots(ctx, transport, on, outcome.release);
        // Refused after taking slots (the address budget of a deferred decision): no handler
        // will run, so they go back before the refusal is written.
        if (!outcome.allowed) return endSlots(on).then(() => this.answer(ctx, transport, outcome));
      }
      return this.answer(ctx, transport, outcome);
    });
  }

  /**
   * A call decided before its body for another route than the one Nest dispatched it to
   * (`includeUpload`, Express routing it once more: versions, hosts): what that decision took
   * is given back, and the call decided by its own route's policies.
   */
  private async redecide(
    ctx: ExecutionContext,
    transport: Transport,
    carrier: object,
    stored: RequestOutcome | Promise<RequestOutcome>,
  ): Promise<boolean> {
    // A decision that failed is not this route's to answer: it is decided afresh below.
    await Promise.resolve(stored).catch(() => undefined);
    await forgetSlots(carrier);
    forgetOutcome(carrier);
    return this.activate(ctx, transport);
  }

  /** The deliver stage, then the response's end watched for `count`. */
  private answer(ctx: ExecutionContext, transport: Transport, outcome: RequestOutcome): true {
    deliver(ctx, transport, outcome, this.planner.events, this.refuser);
    if (outcome.settle) transport.onSent?.(ctx, outcome.settle);
    return true;
  }

  /** `refuse`, bound once: a subclass's override included. */
  private readonly refuser = (ctx: ExecutionContext, outcome: RequestOutcome): never =>
    this.refuse(ctx, outcome);

  /** A transport that cannot read this context leaves it unlimited rather than fail it. */
  private unreadable(ctx: ExecutionContext, error: unknown): boolean {
    this.planner.events.configError(`transport ${ctx.getType()}`, error);
    return true;
  }

  /**
   * The gate stage, then the call's plan: {@link SKIPPED} when the gate stops the call.
   * Rejects only with the `RateLimitConfigError` of a route with invalid policies.
   */
  private decide(
    ctx: ExecutionContext,
    transport: Transport,
    request: RequestLike | undefined,
    carrier: object,
  ): Promise<RequestOutcome> {
    if (this.gate.off) return Promise.resolve(SKIPPED);
    let passes: boolean | Promise<boolean>;
    try {
      passes = this.gate.passes(request, () => this.shouldSkip(ctx));
    } catch (error) {
      return this.undecided(transport, error);
    }
    if (passes === false) return Promise.resolve(SKIPPED);
    if (passes === true) return this.run(ctx, transport, request, carrier);
    return passes.then(
      (on) => (on ? this.run(ctx, transport, request, carrier) : SKIPPED),
      (error: unknown) => this.undecided(transport, error),
    );
  }

  /**
   * The identify stage, then the stages of the call's plan, as compiled for its route (see
   * `plan/compile.ts`): one function the guard calls, whatever they are.
   */
  private run(
    ctx: ExecutionContext,
    transport: Transport,
    request: RequestLike | undefined,
    carrier: object,
  ): Promise<RequestOutcome> {
    let decided: Promise<RequestOutcome>;
    try {
      const plan = this.planner.planOf(ctx);
      if (!plan.limited) return NOTHING_TO_DECIDE;
      const { options, events } = this.planner;
      const identities = identitiesOf(ctx, request, plan.name, options, events);
      const call: Call = { ctx, transport, carrier, request, plan, refuse: this.refuser };
      decided = plan.decide(ctx, identities, call);
    } catch (error) {
      return this.undecided(transport, error);
    }
    return decided.catch((error: unknown) => this.undecided(transport, error));
  }

  /**
   * A route with invalid policies fails as at bootstrap (rethrown); anything else comes from
   * a context the guard cannot read (no class or handler), which stays unlimited.
   */
  private undecided(transport: Transport, error: unknown): Promise<RequestOutcome> {
    if (error instanceof RateLimitConfigError) return Promise.reject(error);
    this.planner.events.configError(`transport ${transport.type}`, error);
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
    return askSkip(this.planner.options, this.planner.events, ctx);
  }

  /**
   * Raises the refusal through the call's transport (on HTTP: an `HttpException` with the 429
   * or 503 body, or RFC 9457 problem details with `errorFormat: 'problem'`). Override it to
   * answer otherwise: the rate-limit headers and `Retry-After` are already set when it is
   * called (`outcome.headers` holds them too; `outcome.refusal` the status, wait in seconds,
   * message and refusing policies).
   * @throws always
   */
  protected refuse(ctx: ExecutionContext, outcome: RequestOutcome): never {
    return (adapterOf(ctx) ?? httpTransport).refuse(ctx, outcome.refusal!, outcome.headers);
  }
}

// Tells a route's own guards from ours, subclasses included (see after-route-guards.ts).
Object.defineProperty(RateLimitGuard.prototype, RATE_LIMIT_GUARD, { value: true });
