import type { ExecutionContext } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { RateLimitBackendError, RateLimitConfigError } from '../../core/errors.js';
import type { RateLimitStore } from '../../core/stores/store.js';
import type { RateLimiter } from '../../core/limiter.js';
import type { Decision, Policy, PolicyAlgorithm } from '../../core/policy.js';
import { AllowList } from '../../http/allow-list.js';
import type { RequestLike } from '../../http/ip.js';
import { messageOf, RATE_LIMIT_EVENTS, type RateLimitEvents } from '../observability/events.js';
import { identitiesOf, type IdentityOf } from '../pipeline/identify.js';
import { keys } from '../declare/keys.js';
import { InstanceCount } from '../module/instances.js';
import { Insurance } from '../pipeline/insurance.js';
import type { RateLimitMetrics } from '../observability/metrics.js';
import { DecisionObserver, type Trace } from '../observability/observer.js';
import type { RateLimitModuleOptions } from '../module/options.js';
import { NO_LIMIT, Outcomes, type RequestOutcome } from '../pipeline/outcome.js';
import { PolicyResolver, type Entries, type Entry } from '../pipeline/entries.js';
import { RouteTable, type Route, type Target } from './routes.js';
import { countShadow } from '../pipeline/shadow.js';
import { RequestEnds } from '../pipeline/request-end.js';
import type { DecisionTracing } from '../observability/tracing.js';

/**
 * Everything the guard needs, built once at bootstrap from the module options: the rules of
 * every route (validated eagerly), and the per-request evaluation. Knows no transport: it is
 * handed the context (for user functions) and the request to read the client address from.
 */
export class RateLimitRuntime {
  private readonly routes: RouteTable;
  private readonly policies: PolicyResolver;
  private readonly outcomes: Outcomes;
  /** Refunds and slot releases when a request ends. */
  private readonly ends: RequestEnds;
  /** Set only when `onDecision` or `metrics` is: otherwise requests pay nothing for them. */
  private readonly observer: DecisionObserver | undefined;
  /** Clients never limited (the `allowList` option); undefined without one. */
  readonly allowList: AllowList | undefined;
  /** Insurance limits of `onStoreFailure: 'local'` policies. */
  private readonly insurance: Insurance;
  /** How many processes share the store, for {@link RateLimitRuntime.insurance}. */
  private readonly instances: InstanceCount;

  /**
   * @param global the module's guard is global (`APP_GUARD`): on HTTP routes with guards of
   *   their own, the policies that need the user are decided after those guards
   * @param instances the processes sharing the store; default: the module's `instances`
   */
  constructor(
    readonly limiter: RateLimiter,
    readonly options: RateLimitModuleOptions,
    private readonly events: RateLimitEvents,
    metrics?: RateLimitMetrics,
    /** Annotates the active span, when `@opentelemetry/api` is loaded (see `tracing`). */
    private readonly tracing?: DecisionTracing,
    global = false,
    instances?: InstanceCount,
  ) {
    this.instances =
      instances ?? new InstanceCount(options.instances, undefined, false, '', undefined);
    // Announcing starts with the first policy that needs the count, at bootstrap.
    this.routes = new RouteTable(options, global, () => this.instances.start());
    this.policies = new PolicyResolver(options, events);
    this.outcomes = new Outcomes(options, events);
    this.ends = new RequestEnds(limiter, events);
    const insurance = new Insurance(() => this.instances.value, options.prefix, events);
    this.insurance = insurance;
    metrics?.watchInsurance(
      () => insurance.inForce,
      () => this.instances.value,
    );
    this.allowList =
      options.allowList === undefined
        ? undefined
        : new AllowList(options.allowList, options, 'RateLimitModule options');
    this.observer =
      options.onDecision || metrics
        ? new DecisionObserver(options.onDecision, metrics, (where, error) =>
            events.configError(where, error),
          )
        : undefined;
  }

  /**
   * The rules of one handler (see {@link RouteTable.routeOf}).
   * @throws {RateLimitConfigError} when a policy conflicts with the module options
   */
  routeOf(controller: Target, handler: Target): Route {
    const route = this.routes.routeOf(controller, handler);
    unsupported(route, this.limiter.store);
    return route;
  }

  /** See {@link RouteTable.knownPolicy}. */
  knownPolicy(scope: string, name: string, algorithm: PolicyAlgorithm): Policy | undefined {
    return this.routes.knownPolicy(scope, name, algorithm);
  }

  /** See {@link RouteTable.knownPolicies}. */
  knownPolicies(): { scope: string; policy: Policy }[] {
    return this.routes.knownPolicies();
  }

  /**
   * Decides one call of a handler. Never throws but for a route whose policies are invalid
   * (`RateLimitConfigError`, which bootstrap reports first for every controller): a failing
   * key function falls back to the IP, a failing rate or cost function leaves its own policy
   * out (or refuses, when fail-closed), each logged as `rate_limit.config_error`; a store
   * failure follows each policy's failure mode.
   *
   * @param request what the client address is read from (`keys.ip`, and the fallback of
   *   every key function); undefined when the transport has none (`ip:unknown`)
   */
  evaluate(ctx: ExecutionContext, request: RequestLike | undefined): Promise<RequestOutcome> {
    return this.evaluateRoute(ctx, request, this.routes.routeOf(ctx.getClass(), ctx.getHandler()));
  }

  /**
   * The policies of this call that wait for the route's own guards (see
   * {@link Route.afterGuards}), to decide with {@link RateLimitRuntime.evaluateRoute} once
   * they have run; undefined when there are none.
   */
  afterGuardsOf(ctx: ExecutionContext): Route | undefined {
    return this.routes.routeOf(ctx.getClass(), ctx.getHandler()).afterGuards;
  }

  /**
   * Spends, under the client's address, the budgets of the requests a route's own guards
   * refuse ({@link Route.unauthenticated}): before those guards run, so that requests in
   * flight together all count. The outcome's `settle` gives the spending back; call it once
   * the guards have admitted the request.
   */
  evaluateAsAddress(
    ctx: ExecutionContext,
    request: RequestLike | undefined,
    route: Route,
  ): Promise<RequestOutcome> {
    const refused = route.unauthenticated;
    if (refused === undefined || refused.enforced.length === 0) return Promise.resolve(NO_LIMIT);
    const identities = identitiesOf(ctx, request, route.name, this.options, this.events);
    const address: IdentityOf = () => identities(keys.ip);
    return this.decide(ctx, refused, address, undefined);
  }

  /** {@link RateLimitRuntime.evaluate} of the rules of `route`. */
  evaluateRoute(
    ctx: ExecutionContext,
    request: RequestLike | undefined,
    route: Route,
  ): Promise<RequestOutcome> {
    if (route.enforced.length === 0 && route.shadowed.length === 0)
      return Promise.resolve(NO_LIMIT);
    const identities = identitiesOf(ctx, request, route.name, this.options, this.events);
    // Undefined unless an OpenTelemetry SDK records a span for this request.
    const span = this.tracing?.activeSpan();
    if (this.observer === undefined && span === undefined) {
      return this.decide(ctx, route, identities, undefined);
    }
    return this.observed(ctx, route, identities, span);
  }

  /** {@link RateLimitRuntime.evaluateRoute} for `onDecision`, metrics or a span. */
  private async observed(
    ctx: ExecutionContext,
    route: Route,
    identities: IdentityOf,
    span: ReturnType<NonNullable<RateLimitRuntime['tracing']>['activeSpan']>,
  ): Promise<RequestOutcome> {
    const trace: Trace = {
      identity: await identities((route.enforced[0] ?? route.shadowed[0])!.key),
    };
    const outcome = await this.decide(ctx, route, identities, trace);
    this.observer?.finish(route.name, trace, outcome.allowed);
    if (span) this.tracing!.annotate(span, trace, outcome.allowed);
    return outcome;
  }

  /** One outcome of the two decisions of a route whose user policies waited for its guards. */
  combine(first: RequestOutcome, second: RequestOutcome): RequestOutcome {
    return this.outcomes.combine(first, second);
  }

  /** Stops what runs on timers (at shutdown). */
  close(): void {
    this.instances.stop();
  }

  /** Logs `rate_limit.config_error` for a user function that failed at request time. */
  reportConfigError(where: string, error: unknown): void {
    this.events.configError(where, error);
  }

  /** {@link RateLimitRuntime.evaluate}, filling `trace` when the request is observed. */
  private decide(
    ctx: ExecutionContext,
    route: Route,
    identities: IdentityOf,
    trace: Trace | undefined,
  ): Promise<RequestOutcome> {
    const fixed = this.policies.fixedEntries(route, identities);
    // The usual route: known identities, one store call, nothing else to wait for. Kept free
    // of async functions, each of which would add promises and microtask turns per request.
    if (
      fixed !== undefined &&
      trace === undefined &&
      !route.counting &&
      route.shadowed.length === 0 &&
      fixed.entries.length > 0
    ) {
      const enforcing = fixed.entries;
      const entries = enforcing.map((e) => e.entry);
      return this.limiter.consumeEach(entries).then(
        (decision) => {
          this.insurance.storeAnswered();
          const outcome = this.outcomes.decided(decision, enforcing, route.name);
          if (!decision.leases) return outcome;
          return { ...outcome, release: this.ends.releaser(route.name, decision.leases) };
        },
        (error: unknown) => this.storeFailed(route, enforcing, error),
      );
    }
    return this.decideFully(ctx, route, identities, trace, fixed);
  }

  /**
   * The store did not answer for `enforcing`: logged; fail-closed wins (503), else the
   * insurance limits decide, and the fail-open rest admit.
   */
  private storeFailed(
    route: Route,
    enforcing: Entry[],
    error: unknown,
  ): RequestOutcome | Promise<RequestOutcome> {
    const kind = error instanceof RateLimitBackendError ? error.kind : 'error';
    this.events.throttled(RATE_LIMIT_EVENTS.backendError, kind, {
      route: route.name,
      message: messageOf(error),
    });
    // Concurrency limits have no insurance: a local slot could not be given back.
    const local = enforcing.filter(
      (e) => e.rule.onStoreFailure === 'local' && e.rule.policy?.algorithm !== 'concurrency',
    );
    if (local.length === 0 || route.enforced.some((r) => r.failClosed)) {
      return this.outcomes.failure(route.enforced);
    }
    return this.insurance
      .decide(local, route.name)
      .then((insured) => this.outcomes.decided(insured.decision, insured.local, route.name));
  }

  private async decideFully(
    ctx: ExecutionContext,
    route: Route,
    identities: IdentityOf,
    trace: Trace | undefined,
    fixed: Entries | undefined,
  ): Promise<RequestOutcome> {
    const { entries: enforcing, broken } =
      fixed ?? (await this.policies.entriesOf(ctx, route, route.enforced, identities));
    // A policy whose rate or cost function failed is left out, changing nothing; the other
    // policies still apply. A fail-closed one refuses instead, as when its store is down.
    if (broken.length > 0 && broken.some((r) => r.failClosed)) {
      if (trace) trace.brokenClosed = true;
      return this.outcomes.failure(broken);
    }
    let outcome: RequestOutcome = NO_LIMIT;
    if (enforcing.length > 0) {
      const entries = enforcing.map((e) => e.entry);
      const started = trace ? performance.now() : 0;
      try {
        let settle: ((status: number) => void) | undefined;
        let decision: Decision;
        if (route.counting) {
          const spent = await this.limiter.spend(entries);
          decision = spent.decision;
          if (spent.spending) settle = this.ends.settler(route.name, enforcing, spent.spending);
        } else {
          decision = await this.limiter.consumeEach(entries);
        }
        this.insurance.storeAnswered();
        if (trace) {
          // A deny-cache answer is no store call: it stays out of the store latency.
          if (!decision.cached) trace.enforcedMs = performance.now() - started;
          trace.enforcing = entries;
          trace.decision = decision;
        }
        outcome = this.outcomes.decided(decision, enforcing, route.name);
        if (settle && outcome.allowed) outcome = { ...outcome, settle };
        if (decision.leases)
          outcome = { ...outcome, release: this.ends.releaser(route.name, decision.leases) };
      } catch (error) {
        if (trace) {
          trace.enforcedMs = performance.now() - started;
          trace.enforcing = entries;
          trace.enforcedError = error instanceof RateLimitBackendError ? error.kind : 'error';
        }
        return await this.storeFailed(route, enforcing, error);
      }
    }
    // Shadow policies count only what the enforced ones let through, in a call of their
    // own, so a would-be denial never blocks the request.
    if (outcome.allowed && route.shadowed.length > 0) {
      const { entries } = await this.policies.entriesOf(ctx, route, route.shadowed, identities);
      const leases = await countShadow(this.limiter, this.events, entries, route.name, trace);
      // Shadow slots are held like enforced ones, so the would-be refusals are real ones.
      if (leases) outcome = this.ends.withRelease(outcome, this.ends.releaser(route.name, leases));
    }
    return outcome;
  }
}

/**
 * Refuses, at bootstrap, a route whose policies need what the store lacks: `refund` for
 * `count`, `release` for concurrency limits (a store of your own may leave them out).
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION`, naming the route and the method
 */
function unsupported(route: Route, store: RateLimitStore): void {
  // Every step of the route: its policies, those that wait for its guards, and the address
  // budgets spent before them (always refunded, as `count: 'failed'`).
  const steps = [route, route.afterGuards, route.afterGuards?.unauthenticated];
  const enforced = steps.flatMap((r) => r?.enforced ?? []);
  const shadowed = steps.flatMap((r) => r?.shadowed ?? []);
  const missing =
    typeof store.release !== 'function' &&
    [...enforced, ...shadowed].some((r) => r.policy?.algorithm === 'concurrency')
      ? 'release'
      : // Shadow policies never refund: they count in a call of their own.
        typeof store.refund !== 'function' && enforced.some((r) => r.options.count !== undefined)
        ? 'refund'
        : undefined;
  if (missing === undefined) return;
  const what = missing === 'release' ? 'a concurrency limit' : 'count by outcome';
  throw new RateLimitConfigError(
    'ERR_RATE_LIMIT_OPTION',
    `${what} needs a store that can ${missing}: implement RateLimitStore.${missing}`,
    route.name,
  );
}
