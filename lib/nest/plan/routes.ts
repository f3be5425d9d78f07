import type { Policy, PolicyAlgorithm } from '../../core/model/policy.js';
import {
  declare,
  ROUTE_SCOPE,
  type DeclaredPolicy,
  type RateLimitOptions,
} from '../declare/decorators.js';
import { isRateLimitGuard } from '../pipeline/stages/after-route-guards.js';
import { keys, needsUser } from '../declare/keys.js';
import { declareDefaults } from '../declare/defaults.js';
import type { RateLimitModuleOptions, StoreFailureMode } from '../module/options.js';
import {
  DEFAULT_ADDRESS_BURST,
  isConcurrency,
  routeOfRules,
  unauthenticatedRule,
  type Route,
  type Rule,
  type Target,
} from './rules.js';

export type { Route, Rule, Target };
import {
  NEST_METADATA,
  RATE_LIMIT_METADATA,
  SKIP_RATE_LIMIT_METADATA,
} from '../declare/metadata.js';

const SCOPE_UNSAFE = /[^A-Za-z0-9_.\-/]/g;

/**
 * The rules of every route, resolved once from the decorators and the module options
 * (eagerly at bootstrap, so a misconfiguration fails the start), and the static policies
 * they declare, for `RateLimitService.inspect`.
 */
export class RouteTable {
  /** Per controller, then per handler: an inherited handler serves several controllers. */
  private routes = new WeakMap<Target, Map<Target, Route>>();
  /** Set by {@link RouteTable.behindGlobalGuards}. */
  private globalGuardsAfter = false;
  /** Static policies of the routes resolved so far, by scope, name and algorithm; null when two disagree. */
  private readonly known = new Map<string, Policy | null>();
  private readonly defaults: readonly DeclaredPolicy[];

  /**
   * @param deferUserPolicies the module's guard is global, so it runs before a route's own
   *   guards: policies that need the user wait for them (see {@link Route.afterGuards})
   * @param onLocal called for each policy with insurance limits (`onStoreFailure: 'local'`)
   */
  constructor(
    private readonly options: RateLimitModuleOptions,
    private readonly deferUserPolicies = false,
    private readonly onLocal?: () => void,
  ) {
    this.defaults = declareDefaults(options);
  }

  /**
   * The rules of one handler: the module default, then each controller class from the base
   * down, then the handler, merged by name; `@SkipRateLimit` at a level drops what that
   * level inherits.
   * @throws {RateLimitConfigError} when a policy conflicts with the module options
   */
  routeOf(controller: Target, handler: Target): Route {
    let byHandler = this.routes.get(controller);
    const cached = byHandler?.get(handler);
    if (cached) return cached;
    const merged = new Map<string, { declared: DeclaredPolicy; isDefault: boolean }>();
    // Not on message and event handlers: a default keyed by the caller would put every
    // producer of a transport without addresses (NATS, Kafka, Redis) in one budget, and drop
    // events. A handler there is limited by its own @RateLimit, with a key over its payload.
    if (Reflect.getMetadata(NEST_METADATA.pattern, handler) === undefined) {
      for (const d of this.defaults) merged.set(d.name, { declared: d, isDefault: true });
    }
    for (const holder of [...classChain(controller), handler]) {
      const skip: true | string[] | undefined = Reflect.getOwnMetadata(
        SKIP_RATE_LIMIT_METADATA,
        holder,
      );
      if (skip === true) merged.clear();
      else skip?.forEach((name) => merged.delete(name));
      const declared: DeclaredPolicy[] = Reflect.getOwnMetadata(RATE_LIMIT_METADATA, holder) ?? [];
      for (const d of declared) merged.set(d.name, { declared: d, isDefault: false });
    }
    const name = `${controller.name}.${handler.name}`;
    // Class and method names may hold characters a key must not ($, unicode): replace them.
    const routeScope = name.replace(SCOPE_UNSAFE, '_').slice(0, 128);
    const rules = [...merged.values()].map(({ declared, isDefault }) =>
      this.toRule(declared, isDefault, routeScope),
    );
    const late =
      this.deferUserPolicies && this.authenticatedLater(controller, handler)
        ? rules.filter(readsUser)
        : [];
    const route: Route =
      late.length === 0
        ? routeOfRules(name, rules)
        : {
            ...routeOfRules(
              name,
              rules.filter((r) => !late.includes(r)),
            ),
            afterGuards: {
              ...routeOfRules(name, late),
              unauthenticated: routeOfRules(
                name,
                // A slot is per request in flight: nothing to hold for refused ones.
                late
                  .filter((r) => !r.shadow && !isConcurrency(r.policy))
                  .map((r) =>
                    unauthenticatedRule(
                      r,
                      r.options.addressBurst ?? this.options.addressBurst ?? DEFAULT_ADDRESS_BURST,
                    ),
                  ),
              ),
            },
          };
    if (!byHandler) this.routes.set(controller, (byHandler = new Map()));
    byHandler.set(handler, route);
    // The budgets of requests the route's guards refuse are the operator's to inspect too.
    for (const rule of [...rules, ...(route.afterGuards?.unauthenticated?.enforced ?? [])]) {
      if (!rule.policy) continue;
      const id = knownId(rule.scope, rule.name, rule.policy.algorithm);
      const seen = this.known.get(id);
      if (seen === undefined) this.known.set(id, rule.policy);
      else if (seen !== null && !sameRate(seen, rule.policy)) this.known.set(id, null);
    }
    return route;
  }

  /**
   * Tells the table that the app runs global guards of its own after the module's (an
   * `APP_GUARD` registered after it, `app.useGlobalGuards`): every HTTP route is then
   * authenticated after the module's guard, as one with guards of its own is. The routes
   * resolved so far are resolved again.
   */
  behindGlobalGuards(): void {
    if (this.globalGuardsAfter) return;
    this.globalGuardsAfter = true;
    this.routes = new WeakMap();
  }

  /**
   * Whether Nest runs guards of the app's after the module's guard on this handler: an HTTP
   * route with guards of its own, or any HTTP route behind global guards registered after.
   */
  private authenticatedLater(controller: Target, handler: Target): boolean {
    if (Reflect.getMetadata(NEST_METADATA.route, handler) === undefined) return false;
    return this.globalGuardsAfter || hasOwnGuards(controller, handler);
  }

  /**
   * The route of policies declared outside any handler (WebSocket connection limits), named
   * `name` in logs, each filled in with the module's options as a decorator's would be.
   */
  routeOfPolicies(name: string, declared: readonly DeclaredPolicy[]): Route {
    return routeOfRules(
      name,
      declared.map((d) => this.toRule(d, false, name)),
    );
  }

  /**
   * The policy with this scope, name and algorithm among the static policies of the routes
   * resolved so far (every route, after bootstrap); undefined when none, or when routes
   * sharing the scope declare different rates for it.
   */
  knownPolicy(scope: string, name: string, algorithm: PolicyAlgorithm): Policy | undefined {
    return this.known.get(knownId(scope, name, algorithm)) ?? undefined;
  }

  /** Every policy {@link RouteTable.knownPolicy} recognises, with its scope. */
  knownPolicies(): { scope: string; policy: Policy }[] {
    const out: { scope: string; policy: Policy }[] = [];
    for (const [id, policy] of this.known) {
      if (policy) out.push({ scope: (JSON.parse(id) as string[])[0]!, policy });
    }
    return out;
  }

  /**
   * @param isDefault a module default: its budget is global unless it names a scope
   * @param routeScope the scope of this route's own budget (`scope: 'route'`, or no scope on
   *   a decorator)
   */
  /**
   * The policy's own `onStoreFailure`, else its `failClosed`, else the module's, in that order.
   * A `'local'` one tells `onLocal`: the number of processes must then be known.
   */
  private storeFailureMode(options: RateLimitOptions): StoreFailureMode {
    const flag = (closed: boolean | undefined) =>
      closed === undefined ? undefined : closed ? 'closed' : 'open';
    const mode =
      options.onStoreFailure ??
      flag(options.failClosed) ??
      this.options.onStoreFailure ??
      flag(this.options.failClosed) ??
      'open';
    if (mode === 'local') this.onLocal?.();
    return mode;
  }

  private toRule(declared: DeclaredPolicy, isDefault: boolean, routeScope: string): Rule {
    const { options } = declared;
    let policy = declared.policy;
    const algorithm = options.algorithm ?? this.options.algorithm;
    if (algorithm !== undefined && options.algorithm === undefined && !isConcurrency(policy)) {
      // The module's algorithm applies: check the policy again under it (a burst on a
      // window algorithm fails here, at bootstrap, not on every request).
      const rate = policy ?? { limit: 1, periodMs: 1 };
      const checked = declare(rate, { ...options, algorithm }, declared.where).policy;
      if (policy) policy = checked;
    }
    const onStoreFailure = this.storeFailureMode(options);
    return {
      name: declared.name,
      policy,
      rateFn: declared.rateFn,
      options,
      scope:
        options.scope === ROUTE_SCOPE || (options.scope === undefined && !isDefault)
          ? routeScope
          : (options.scope ?? 'global'),
      key: options.key ?? this.options.key ?? keys.userOrIp,
      cost: options.cost ?? 1,
      failClosed: onStoreFailure === 'closed',
      onStoreFailure,
      shadow: this.options.mode === 'shadow' || options.shadow === true,
      headers: options.headers !== false,
      exposeDetails: options.exposeDetails !== false,
      where: declared.where,
    };
  }
}

/**
 * Whether any function of the rule (its key, rate or cost function) may read the user: then,
 * on a route authenticated after the module's guard, it is decided after authentication.
 */
export function readsUser(rule: Rule): boolean {
  return (
    needsUser(rule.key) ||
    (rule.rateFn !== undefined && needsUser(rule.rateFn)) ||
    (typeof rule.cost === 'function' && needsUser(rule.cost))
  );
}

/**
 * Whether the handler is an HTTP route with guards of its own (`@UseGuards` on the
 * controller, its base classes or the handler), which Nest runs after the global ones:
 * authentication, usually. Ours do not count.
 */
function hasOwnGuards(controller: Target, handler: Target): boolean {
  const own = (target: Target): unknown[] =>
    (Reflect.getMetadata(NEST_METADATA.guards, target) as unknown[] | undefined) ?? [];
  return [...own(controller), ...own(handler)].some((guard) => !isRateLimitGuard(guard));
}

/** A controller class and its base classes, the base first. */
function classChain(controller: Target): Target[] {
  const chain: Target[] = [];
  for (
    let c: unknown = controller;
    typeof c === 'function' && c !== Function.prototype;
    c = Object.getPrototypeOf(c)
  ) {
    chain.unshift(c as Target);
  }
  return chain;
}

function knownId(scope: string, name: string, algorithm: PolicyAlgorithm): string {
  return JSON.stringify([scope, name, algorithm]);
}

function sameRate(a: Policy, b: Policy): boolean {
  return a.limit === b.limit && a.periodMs === b.periodMs && a.capacity === b.capacity;
}
