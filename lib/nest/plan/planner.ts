import type { ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError } from '../../core/errors.js';
import type { RateLimiter } from '../../core/limiter.js';
import type { Policy, PolicyAlgorithm } from '../../core/model/policy.js';
import type { RateLimitStore } from '../../core/stores/store.js';
import { AllowList } from '../../http/allow-list.js';
import type { InstanceCount } from '../module/instances.js';
import type { RateLimitModuleOptions } from '../module/options.js';
import type { RateLimitEvents } from '../observability/events.js';
import type { RateLimitMetrics } from '../observability/metrics.js';
import { DecisionObserver } from '../observability/observer.js';
import type { DecisionTracing } from '../observability/tracing.js';
import type { RoutePlan } from '../pipeline/call.js';
import { EntryResolver } from '../pipeline/entry-resolver.js';
import { Insurance } from '../pipeline/stages/insurance.js';
import { RequestEnds } from '../end/request-end.js';
import { OutcomeShaper } from '../pipeline/outcome-shaper.js';
import type { StageServices } from '../pipeline/services.js';
import { compile } from './compile.js';
import type { DeclaredPolicy } from '../declare/decorators.js';
import { RouteTable, type Route, type Target } from './routes.js';
import { createOverload, type Overload } from '../overload/runtime.js';

/**
 * The plans of every route, compiled once per handler (eagerly at bootstrap, so a
 * misconfiguration fails the start), and the services their stages share. One per module.
 */
export class RoutePlanner {
  /** What the stages of every plan share. */
  readonly services: StageServices;
  /** The module's `allowList`, parsed once: clients on it are never limited. */
  readonly allowList: AllowList | undefined;
  /** Overload protection, under the `overload` option only. */
  readonly overload: Overload | undefined;
  private readonly routes: RouteTable;
  /** Per controller, then per handler: an inherited handler serves several controllers. */
  private plans = new WeakMap<Target, Map<Target, RoutePlan>>();

  /**
   * @param global the module's guard is global (`APP_GUARD`): on HTTP routes with guards of
   *   their own, the policies that need the user are decided after those guards
   * @param instances the processes sharing the store, for insurance limits
   */
  constructor(
    limiter: RateLimiter,
    readonly options: RateLimitModuleOptions,
    readonly events: RateLimitEvents,
    private readonly instances: InstanceCount,
    metrics: RateLimitMetrics | undefined,
    tracing: DecisionTracing | undefined,
    global = false,
  ) {
    this.allowList =
      options.allowList === undefined
        ? undefined
        : new AllowList(options.allowList, options, 'RateLimitModule options');
    this.overload = createOverload(options, events, tracing);
    // Announcing starts with the first policy that needs the count, at bootstrap.
    this.routes = new RouteTable(options, global, () => instances.start());
    const insurance = new Insurance(() => instances.value, options.prefix, events);
    metrics?.watchInsurance(
      () => insurance.inForce,
      () => instances.value,
    );
    this.services = {
      limiter,
      options,
      events,
      entries: new EntryResolver(options, events),
      shape: new OutcomeShaper(options, events),
      ends: new RequestEnds(limiter, events),
      insurance,
      observer:
        options.onDecision || metrics
          ? new DecisionObserver(options.onDecision, metrics, (where, error) =>
              events.configError(where, error),
            )
          : undefined,
      tracing,
    };
  }

  /** The module's limiter: what every stage's store call goes through. */
  get limiter(): RateLimiter {
    return this.services.limiter;
  }

  /**
   * The plan of the handler of `ctx`.
   * @throws {RateLimitConfigError} when a policy conflicts with the module options
   */
  planOf(ctx: ExecutionContext): RoutePlan {
    const controller = ctx.getClass();
    const handler = ctx.getHandler();
    const plan = this.plans.get(controller)?.get(handler);
    return plan ?? this.compile(controller, handler);
  }

  /**
   * The rules of one handler (see {@link RouteTable.routeOf}), its plan compiled.
   * @throws {RateLimitConfigError} when a policy conflicts with the module options or needs
   *   what the store lacks
   */
  routeOf(controller: Target, handler: Target): Route {
    return (this.plans.get(controller)?.get(handler) ?? this.compile(controller, handler)).route;
  }

  /**
   * The app runs global guards after the module's: per-user policies wait for them on every
   * HTTP route (see {@link RouteTable.behindGlobalGuards}). Before Nest builds its routes.
   */
  behindGlobalGuards(): void {
    this.routes.behindGlobalGuards();
    this.plans = new WeakMap();
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
   * The plan of policies declared outside any handler (WebSocket connection limits, GraphQL
   * operation budgets), named `name` in logs; compiled anew on each call: cache it.
   * @param spends spend rather than consume, so the outcome holds its `spending` for a
   *   refund by the caller
   */
  planOfPolicies(name: string, declared: readonly DeclaredPolicy[], spends = false): RoutePlan {
    const route = this.routes.routeOfPolicies(name, declared);
    return compile(spends ? { ...route, counting: true } : route, this.services);
  }

  /**
   * Stops what runs on timers (at shutdown): the instance count, the releases kept for a
   * retry, the insurance limits' local store.
   */
  close(): void {
    this.instances.stop();
    this.services.limiter.close();
    this.services.insurance.close();
  }

  private compile(controller: Target, handler: Target): RoutePlan {
    const route = this.routes.routeOf(controller, handler);
    unsupported(route, this.services.limiter.store);
    const plan = compile(route, this.services);
    let byHandler = this.plans.get(controller);
    if (!byHandler) this.plans.set(controller, (byHandler = new Map()));
    byHandler.set(handler, plan);
    return plan;
  }
}

/**
 * Refuses, at bootstrap, a route whose policies need what the store lacks: `refund` for
 * `count`, `release` for concurrency limits (a store of your own may leave them out).
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_UNSUPPORTED`, naming the route and the method
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
    'ERR_RATE_LIMIT_STORE_UNSUPPORTED',
    `${what} needs a store that can ${missing}: implement RateLimitStore.${missing}`,
    route.name,
  );
}
