import type { ExecutionContext } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { quote, RateLimitBackendError, RateLimitConfigError } from '../core/errors.js';
import { definePolicy, type LimitEntry, type RateLimiter } from '../core/limiter.js';
import { checkCost, type Algorithm, type Decision, type Policy } from '../core/policy.js';
import type { RateInput } from '../core/rate.js';
import {
  rateLimitHeaders,
  retryAfterSeconds,
  type HeaderOptions,
  type HeaderPolicy,
} from '../http/headers.js';
import { ipIdentity } from '../http/identities.js';
import type { RequestLike } from '../http/ip.js';
import { serviceUnavailableBody, tooManyRequestsBody } from '../http/responses.js';
import {
  declare,
  type CostFn,
  type DeclaredPolicy,
  type RateFn,
  type RateLimitOptions,
} from './decorators.js';
import { hashIdentity, RATE_LIMIT_EVENTS, type RateLimitEvents } from './events.js';
import type { RateLimitMetrics } from './metrics.js';
import { DecisionObserver, type Trace } from './observer.js';
import { keys, type KeyFn, type KeyHelpers } from './keys.js';
import type { RateLimitModuleOptions } from './options.js';
import { RATE_LIMIT_METADATA, SKIP_RATE_LIMIT_METADATA } from './tokens.js';

/** A controller class or a handler method: what Nest's reflection reads metadata from. */
type Target = { readonly name: string };

/** One policy as it applies to one route, with every default filled in. */
interface Rule {
  readonly name: string;
  readonly policy?: Policy;
  readonly rateFn?: RateFn;
  readonly options: RateLimitOptions;
  readonly scope: string;
  readonly key: KeyFn;
  readonly cost: number | CostFn;
  readonly failClosed: boolean;
  readonly shadow: boolean;
  readonly headers: boolean;
  readonly exposeDetails: boolean;
  readonly where: string;
}

/** What the guard tells the interceptor and the caller. */
export interface RequestOutcome {
  /** Admit the request. */
  readonly allowed: boolean;
  /** Informational headers to send (empty in shadow mode or when the store failed). */
  readonly headers: Record<string, string>;
  /** When refused: status 429 or 503 and its body. */
  readonly refusal?: { status: 429 | 503; body: object };
  /** The enforced decision, when the store answered. */
  readonly decision?: Decision;
}

const NO_LIMIT: RequestOutcome = { allowed: true, headers: {} };
const NO_RULES: Rule[] = [];

/** The rules of one route, split once by mode. */
export interface Route {
  /** `Controller.handler`, for logs. */
  readonly name: string;
  readonly enforced: readonly Rule[];
  readonly shadowed: readonly Rule[];
  /** Every enforced rule has a fixed policy and cost: nothing to await but its identity. */
  readonly fixed: boolean;
}

type Entry = { rule: Rule; entry: LimitEntry };

const SCOPE_UNSAFE = /[^A-Za-z0-9_.\-/]/g;

/**
 * Everything the guard needs, built once at bootstrap from the module options: the rules of
 * every route (validated eagerly), and the per-request evaluation.
 */
export class RateLimitRuntime {
  /** Per controller, then per handler: an inherited handler serves several controllers. */
  private readonly routes = new WeakMap<Target, Map<Target, Route>>();
  private readonly dynamicPolicies = new Map<string, Policy>();
  /** Static policies of the routes resolved so far, by scope, name and algorithm; null when two disagree. */
  private readonly known = new Map<string, Policy | null>();
  private readonly defaultPolicy: DeclaredPolicy | undefined;
  private readonly headerOptions: HeaderOptions | false;
  /** Set only when `onDecision` or `metrics` is: otherwise requests pay nothing for them. */
  private readonly observer: DecisionObserver | undefined;

  constructor(
    readonly limiter: RateLimiter,
    readonly options: RateLimitModuleOptions,
    private readonly events: RateLimitEvents,
    metrics?: RateLimitMetrics,
  ) {
    this.defaultPolicy = declareDefault(options);
    this.headerOptions =
      options.headers === false ? false : options.headers === true ? {} : (options.headers ?? {});
    this.observer =
      options.onDecision || metrics
        ? new DecisionObserver(options.onDecision, metrics, (where, error) =>
            this.configError(where, error),
          )
        : undefined;
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
    if (this.defaultPolicy) {
      merged.set(this.defaultPolicy.name, { declared: this.defaultPolicy, isDefault: true });
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
      this.toRule(declared, isDefault ? 'global' : routeScope),
    );
    const enforced = rules.filter((r) => !r.shadow);
    const route = {
      name,
      enforced,
      shadowed: rules.filter((r) => r.shadow),
      fixed: enforced.every((r) => r.policy !== undefined && typeof r.cost === 'number'),
    };
    if (!byHandler) this.routes.set(controller, (byHandler = new Map()));
    byHandler.set(handler, route);
    for (const rule of rules) {
      if (!rule.policy) continue;
      const id = knownId(rule.scope, rule.name, rule.policy.algorithm);
      const seen = this.known.get(id);
      if (seen === undefined) this.known.set(id, rule.policy);
      else if (seen !== null && !sameRate(seen, rule.policy)) this.known.set(id, null);
    }
    return route;
  }

  /**
   * The policy with this scope, name and algorithm among the static policies of the routes
   * resolved so far (every route, after bootstrap); undefined when none, or when routes
   * sharing the scope declare different rates for it.
   */
  knownPolicy(scope: string, name: string, algorithm: Algorithm): Policy | undefined {
    return this.known.get(knownId(scope, name, algorithm)) ?? undefined;
  }

  /** Every policy {@link RateLimitRuntime.knownPolicy} recognises, with its scope. */
  knownPolicies(): { scope: string; policy: Policy }[] {
    const out: { scope: string; policy: Policy }[] = [];
    for (const [id, policy] of this.known) {
      if (policy) out.push({ scope: (JSON.parse(id) as string[])[0]!, policy });
    }
    return out;
  }

  /**
   * Decides one HTTP request. Never throws: a failing key function falls back to the IP, a
   * failing rate or cost function leaves its own policy out (or refuses, when fail-closed),
   * each logged as `rate_limit.config_error`; a store failure follows each policy's failure mode.
   */
  async evaluate(ctx: ExecutionContext): Promise<RequestOutcome> {
    const route = this.routeOf(ctx.getClass(), ctx.getHandler());
    if (route.enforced.length === 0 && route.shadowed.length === 0) return NO_LIMIT;
    const observer = this.observer;
    if (observer === undefined) return this.decide(ctx, route, undefined);
    const identities = this.identities(ctx, route);
    const trace: Trace = {
      identity: await identities((route.enforced[0] ?? route.shadowed[0])!.key),
    };
    const outcome = await this.decide(ctx, route, trace, identities);
    observer.finish(route.name, trace, outcome.allowed);
    return outcome;
  }

  /** {@link RateLimitRuntime.evaluate}, filling `trace` when the request is observed. */
  private async decide(
    ctx: ExecutionContext,
    route: Route,
    trace: Trace | undefined,
    identities = this.identities(ctx, route),
  ): Promise<RequestOutcome> {
    const { entries: enforcing, broken } =
      this.fixedEntries(route, identities) ??
      (await this.entriesOf(ctx, route, route.enforced, identities));
    // A policy whose rate or cost function failed is left out, changing nothing; the other
    // policies still apply. A fail-closed one refuses instead, as when its store is down.
    if (broken.length > 0 && broken.some((r) => r.failClosed)) {
      if (trace) trace.brokenClosed = true;
      return this.failure(broken);
    }
    let outcome: RequestOutcome = NO_LIMIT;
    if (enforcing.length > 0) {
      const entries = enforcing.map((e) => e.entry);
      const started = trace ? performance.now() : 0;
      try {
        const decision = await this.limiter.consumeEach(entries);
        if (trace) {
          // A deny-cache answer is no store call: it stays out of the store latency.
          if (!decision.cached) trace.enforcedMs = performance.now() - started;
          trace.enforcing = entries;
          trace.decision = decision;
        }
        outcome = this.outcome(decision, enforcing, route.name);
      } catch (error) {
        const kind = error instanceof RateLimitBackendError ? error.kind : 'error';
        if (trace) {
          trace.enforcedMs = performance.now() - started;
          trace.enforcing = entries;
          trace.enforcedError = kind;
        }
        this.events.throttled(RATE_LIMIT_EVENTS.backendError, kind, {
          route: route.name,
          message: messageOf(error),
        });
        return this.failure(route.enforced);
      }
    }
    // Shadow policies count only what the enforced ones let through, in a call of their
    // own, so a would-be denial never blocks the request.
    if (outcome.allowed && route.shadowed.length > 0) {
      const { entries } = await this.entriesOf(ctx, route, route.shadowed, identities);
      await this.shadow(entries, route.name, trace);
    }
    return outcome;
  }

  /**
   * Each key function runs once per request; a broken one falls back to the client IP.
   * The identity of each key function, computed once per request. Synchronous when the key
   * function is (the usual case), so a fixed route awaits nothing before the store call.
   */
  private identities(ctx: ExecutionContext, route: Route) {
    const request = ctx.switchToHttp().getRequest<RequestLike>();
    let ip: string | undefined;
    const helpers: KeyHelpers = { ip: () => (ip ??= ipIdentity(request, this.options)) };
    const accept = (id: unknown): string => {
      if (id === undefined || id === '') return helpers.ip();
      if (typeof id === 'string') return id;
      if (typeof id === 'number' && Number.isFinite(id)) return String(id);
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OPTION',
        `a key function returned ${quote(id)}`,
        route.name,
      );
    };
    const fallback = (error: unknown): string => {
      this.configError(route.name, error);
      return helpers.ip();
    };
    const cache = new Map<KeyFn, string | Promise<string>>();
    return (key: KeyFn): string | Promise<string> => {
      let identity = cache.get(key);
      if (identity === undefined) {
        try {
          const id: unknown = key(ctx, helpers);
          identity = isThenable(id) ? Promise.resolve(id).then(accept).catch(fallback) : accept(id);
        } catch (error) {
          identity = fallback(error);
        }
        cache.set(key, identity);
      }
      return identity;
    };
  }

  /** The entries of a fixed route whose identities are all known already; else undefined. */
  private fixedEntries(
    route: Route,
    identityOf: (key: KeyFn) => string | Promise<string>,
  ): { entries: Entry[]; broken: Rule[] } | undefined {
    if (!route.fixed) return undefined;
    const entries: Entry[] = [];
    for (const rule of route.enforced) {
      const identity = identityOf(rule.key);
      if (typeof identity !== 'string') return undefined;
      entries.push({
        rule,
        entry: { identity, policy: rule.policy!, cost: rule.cost as number, scope: rule.scope },
      });
    }
    return { entries, broken: NO_RULES };
  }

  private async entriesOf(
    ctx: ExecutionContext,
    route: Route,
    rules: readonly Rule[],
    identityOf: (key: KeyFn) => string | Promise<string>,
  ): Promise<{ entries: Entry[]; broken: Rule[] }> {
    const broken: Rule[] = [];
    const fail = (rule: Rule) => (error: unknown) => {
      this.configError(route.name, error);
      broken.push(rule);
      return undefined;
    };
    const entries = await Promise.all(
      rules.map(async (rule): Promise<Entry | undefined> => {
        const [identity, policy, cost] = await Promise.all([
          identityOf(rule.key),
          this.policyOf(rule, ctx).catch(fail(rule)),
          this.costOf(rule, ctx).catch(fail(rule)),
        ]);
        if (policy === undefined || cost === undefined) return undefined;
        return { rule, entry: { identity, policy, cost, scope: rule.scope } };
      }),
    );
    return { entries: entries.filter((e) => e !== undefined), broken };
  }

  /** Logs `rate_limit.config_error` for a user function that failed at request time. */
  reportConfigError(where: string, error: unknown): void {
    this.configError(where, error);
  }

  private configError(route: string, error: unknown): undefined {
    this.events.throttled(RATE_LIMIT_EVENTS.configError, route, {
      route,
      message: messageOf(error),
    });
    return undefined;
  }

  private async policyOf(rule: Rule, ctx: ExecutionContext): Promise<Policy> {
    if (rule.policy) return rule.policy;
    const rate: RateInput = await rule.rateFn!(ctx);
    const algorithm = rule.options.algorithm ?? this.options.algorithm;
    const cacheKey = JSON.stringify([
      rule.where,
      rule.name,
      rate,
      algorithm,
      rule.options.burst,
      rule.options.scope,
    ]);
    let policy = this.dynamicPolicies.get(cacheKey);
    if (!policy) {
      policy = definePolicy(
        { name: rule.name, rate, algorithm, burst: rule.options.burst, scope: rule.options.scope },
        rule.where,
      );
      // Rates come from code and plans, so there are few; a cap keeps a buggy rate function from growing it.
      if (this.dynamicPolicies.size >= 1000) this.dynamicPolicies.clear();
      this.dynamicPolicies.set(cacheKey, policy);
    }
    return policy;
  }

  private async costOf(rule: Rule, ctx: ExecutionContext): Promise<number> {
    const cost = typeof rule.cost === 'function' ? await rule.cost(ctx) : rule.cost;
    checkCost(cost, undefined, rule.name, rule.where);
    return cost;
  }

  private async shadow(shadowed: Entry[], route: string, trace: Trace | undefined): Promise<void> {
    if (shadowed.length === 0) return;
    const entries = shadowed.map((e) => e.entry);
    if (trace) trace.shadowEntries = entries;
    const started = trace ? performance.now() : 0;
    try {
      // Every would-be denial is counted, never answered from the deny cache.
      const decision = await this.limiter.consumeEach(entries, { denyCache: false });
      if (trace) {
        trace.shadowMs = performance.now() - started;
        trace.shadowDecision = decision;
      }
      decision.policies.forEach((p, i) => {
        if (p.allowed) return;
        const { entry } = shadowed[i]!;
        this.events.shadowBlocked(route, entry.identity, () => ({
          route,
          policy: p.name,
          identity: hashIdentity(entry.identity),
          cost: entry.cost,
          retryAfterMs: p.retryAfterMs,
        }));
      });
    } catch (error) {
      const kind = error instanceof RateLimitBackendError ? error.kind : 'error';
      if (trace) {
        trace.shadowMs = performance.now() - started;
        trace.shadowError = kind;
      }
      this.events.throttled(RATE_LIMIT_EVENTS.backendError, kind, {
        route,
        shadow: true,
        message: messageOf(error),
      });
    }
  }

  private outcome(decision: Decision, enforcing: Entry[], route: string): RequestOutcome {
    const shown: HeaderPolicy[] = [];
    decision.policies.forEach((p, i) => {
      const { rule, entry } = enforcing[i]!;
      if (p.override) {
        this.events.overrideApplied({
          route,
          identity: entry.identity,
          policy: p.name,
          limit: p.limit,
          periodMs: p.override.periodMs,
        });
      }
      if (rule.headers)
        shown.push({
          name: p.name,
          allowed: p.allowed,
          limit: p.limit,
          remaining: p.remaining,
          resetMs: p.resetMs,
          retryAfterMs: p.retryAfterMs,
          periodMs: p.override?.periodMs ?? (entry.policy as Policy).periodMs,
        });
    });
    const headers = this.headerOptions === false ? {} : rateLimitHeaders(shown, this.headerOptions);
    if (decision.allowed) return { allowed: true, headers, decision };
    const retryAfter = retryAfterSeconds(decision.policies);
    const denying = enforcing.filter((_, i) => !decision.policies[i]!.allowed);
    const exposeDetails = denying.every((e) => e.rule.exposeDetails);
    this.logBlocked(route, decision, enforcing);
    return {
      allowed: false,
      headers:
        retryAfter === undefined ? headers : { ...headers, 'Retry-After': String(retryAfter) },
      refusal: {
        status: 429,
        body: tooManyRequestsBody(retryAfter, {
          message: this.errorMessage(decision),
          exposeDetails,
        }),
      },
      decision,
    };
  }

  /** One `rate_limit.blocked` per identity that refused (usually one), throttled per (route, identity). */
  private logBlocked(route: string, decision: Decision, enforcing: Entry[]): void {
    const done: string[] = [];
    decision.policies.forEach((p, i) => {
      const { identity } = enforcing[i]!.entry;
      if (p.allowed || done.includes(identity)) return;
      done.push(identity);
      this.events.blocked(route, identity, () => {
        const policies: string[] = [];
        let retryAfterMs = 0;
        decision.policies.forEach((q, j) => {
          if (q.allowed || enforcing[j]!.entry.identity !== identity) return;
          policies.push(q.name);
          retryAfterMs = Math.max(retryAfterMs, q.retryAfterMs);
        });
        return {
          route,
          identity: hashIdentity(identity),
          policies,
          cost: enforcing[i]!.entry.cost ?? 1,
          retryAfterMs: retryAfterMs === Infinity ? null : retryAfterMs,
        };
      });
    });
  }

  private errorMessage(decision: Decision): string | undefined {
    const { errorMessage } = this.options;
    if (typeof errorMessage !== 'function') return errorMessage;
    try {
      return String(errorMessage(decision));
    } catch (error) {
      this.configError('errorMessage', error);
      return undefined;
    }
  }

  /** The store did not answer: fail-closed policies refuse with 503, the rest admit. */
  private failure(enforced: readonly Rule[]): RequestOutcome {
    if (!enforced.some((r) => r.failClosed)) return NO_LIMIT;
    return {
      allowed: false,
      headers: { 'Retry-After': '1' },
      refusal: { status: 503, body: serviceUnavailableBody() },
    };
  }

  private toRule(declared: DeclaredPolicy, defaultScope: string): Rule {
    const { options } = declared;
    let policy = declared.policy;
    const algorithm = options.algorithm ?? this.options.algorithm;
    if (algorithm !== undefined && options.algorithm === undefined) {
      // The module's algorithm applies: check the policy again under it (a burst on a
      // window algorithm fails here, at bootstrap, not on every request).
      const rate = policy ?? { limit: 1, periodMs: 1 };
      const checked = declare(rate, { ...options, algorithm }, declared.where).policy;
      if (policy) policy = checked;
    }
    return {
      name: declared.name,
      policy,
      rateFn: declared.rateFn,
      options,
      scope: options.scope ?? defaultScope,
      key: options.key ?? this.options.key ?? keys.userOrIp,
      cost: options.cost ?? 1,
      failClosed: options.failClosed ?? this.options.failClosed ?? false,
      shadow: this.options.mode === 'shadow' || options.shadow === true,
      headers: options.headers !== false,
      exposeDetails: options.exposeDetails !== false,
      where: declared.where,
    };
  }
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

/**
 * Validates the module `default` policy.
 * @throws {RateLimitConfigError}
 */
export function declareDefault(options: RateLimitModuleOptions): DeclaredPolicy | undefined {
  const given = options.default;
  if (given === undefined) return undefined;
  const where = 'RateLimitModule default';
  if (typeof given === 'object' && given !== null && 'rate' in given) {
    const { rate, ...rest } = given;
    return declare(rate, rest, where);
  }
  if (
    typeof given === 'string' ||
    typeof given === 'function' ||
    (typeof given === 'object' && given !== null)
  ) {
    return declare(given, {}, where);
  }
  throw new RateLimitConfigError('ERR_RATE_LIMIT_RATE', `invalid default ${quote(given)}`, where);
}

/** True for a promise or any other `then`-able. */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function knownId(scope: string, name: string, algorithm: Algorithm): string {
  return JSON.stringify([scope, name, algorithm]);
}

function sameRate(a: Policy, b: Policy): boolean {
  return a.limit === b.limit && a.periodMs === b.periodMs && a.capacity === b.capacity;
}
