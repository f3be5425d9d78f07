import type { ExecutionContext } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { quote, RateLimitBackendError, RateLimitConfigError } from '../core/errors.js';
import { definePolicy, type LimitEntry, type RateLimiter } from '../core/limiter.js';
import { checkCost, type Decision, type Policy } from '../core/policy.js';
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
import type { RateLimitEvents } from './events.js';
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

/**
 * Everything the guard needs, built once at bootstrap from the module options: the rules of
 * every route (validated eagerly), and the per-request evaluation.
 */
export class RateLimitRuntime {
  private readonly routes = new Map<Target, Rule[]>();
  private readonly dynamicPolicies = new Map<string, Policy>();
  private readonly defaultPolicy: DeclaredPolicy | undefined;
  private readonly headerOptions: HeaderOptions | false;

  constructor(
    readonly limiter: RateLimiter,
    readonly options: RateLimitModuleOptions,
    private readonly events: RateLimitEvents,
  ) {
    this.defaultPolicy = declareDefault(options);
    this.headerOptions =
      options.headers === false ? false : options.headers === true ? {} : (options.headers ?? {});
  }

  /**
   * The rules of one handler: the module default, then the controller's, then the
   * handler's, merged by name; `@SkipRateLimit` at a level drops what that level inherits.
   * @throws {RateLimitConfigError} when a policy conflicts with the module options
   */
  rulesOf(controller: Target, handler: Target): Rule[] {
    let rules = this.routes.get(handler);
    if (rules) return rules;
    const merged = new Map<string, { declared: DeclaredPolicy; isDefault: boolean }>();
    if (this.defaultPolicy)
      merged.set(this.defaultPolicy.name, { declared: this.defaultPolicy, isDefault: true });
    for (const holder of [controller, handler]) {
      const skip: true | string[] | undefined =
        holder === controller
          ? Reflect.getMetadata(SKIP_RATE_LIMIT_METADATA, holder)
          : Reflect.getOwnMetadata(SKIP_RATE_LIMIT_METADATA, holder);
      if (skip === true) merged.clear();
      else skip?.forEach((name) => merged.delete(name));
      const declared: DeclaredPolicy[] =
        (holder === controller
          ? Reflect.getMetadata(RATE_LIMIT_METADATA, holder)
          : Reflect.getOwnMetadata(RATE_LIMIT_METADATA, holder)) ?? [];
      for (const d of declared) merged.set(d.name, { declared: d, isDefault: false });
    }
    const routeScope = `${controller.name}.${handler.name}`;
    rules = [...merged.values()].map(({ declared, isDefault }) =>
      this.toRule(declared, isDefault ? 'global' : routeScope),
    );
    this.routes.set(handler, rules);
    return rules;
  }

  /** Decides one HTTP request. Never throws: failures follow each policy's failure mode. */
  async evaluate(ctx: ExecutionContext): Promise<RequestOutcome> {
    const rules = this.rulesOf(ctx.getClass(), ctx.getHandler());
    if (rules.length === 0) return NO_LIMIT;
    const route = `${ctx.getClass().name}.${ctx.getHandler().name}`;
    const enforced = rules.filter((r) => !r.shadow);
    let entries: { rule: Rule; entry: LimitEntry }[];
    try {
      entries = await this.entriesOf(ctx, rules);
    } catch (error) {
      this.events.throttled('rate_limit.config_error', route, { route, message: messageOf(error) });
      return this.failure(enforced);
    }
    const shadowed = entries.filter((e) => e.rule.shadow);
    const enforcing = entries.filter((e) => !e.rule.shadow);
    const [decision] = await Promise.all([
      enforcing.length
        ? this.limiter.consumeEach(enforcing.map((e) => e.entry)).catch((error: unknown) => error)
        : undefined,
      shadowed.length ? this.shadow(shadowed, route) : undefined,
    ]);
    if (decision === undefined) return NO_LIMIT;
    if (!isDecision(decision)) {
      const kind = decision instanceof RateLimitBackendError ? decision.kind : 'error';
      this.events.throttled('rate_limit.backend_error', kind, {
        route,
        message: messageOf(decision),
      });
      return this.failure(enforced);
    }
    return this.outcome(decision, enforcing);
  }

  private async entriesOf(ctx: ExecutionContext, rules: Rule[]) {
    const request = ctx.switchToHttp().getRequest<RequestLike>();
    let ip: string | undefined;
    const helpers: KeyHelpers = {
      ip: () => (ip ??= ipIdentity(request, this.options)),
    };
    const identities = new Map<KeyFn, Promise<string>>();
    const identityOf = (key: KeyFn) => {
      let identity = identities.get(key);
      if (!identity) {
        identity = Promise.resolve(key(ctx, helpers)).then((id) =>
          id === undefined || id === '' ? helpers.ip() : String(id),
        );
        identities.set(key, identity);
      }
      return identity;
    };
    return Promise.all(
      rules.map(async (rule) => {
        const [identity, policy, cost] = await Promise.all([
          identityOf(rule.key),
          this.policyOf(rule, ctx),
          this.costOf(rule, ctx),
        ]);
        return { rule, entry: { identity, policy, cost, scope: rule.scope } };
      }),
    );
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

  /** Shadow policies are decided and counted on their own, so they never block the enforced ones. */
  private async shadow(
    shadowed: { rule: Rule; entry: LimitEntry }[],
    route: string,
  ): Promise<void> {
    try {
      const decision = await this.limiter.consumeEach(shadowed.map((e) => e.entry));
      decision.policies.forEach((p, i) => {
        if (p.allowed) return;
        const { entry } = shadowed[i]!;
        this.events.log('rate_limit.shadow_blocked', {
          route,
          policy: p.name,
          identity: hashed(entry.identity),
          cost: entry.cost,
          retryAfterMs: p.retryAfterMs,
        });
      });
    } catch (error) {
      const kind = error instanceof RateLimitBackendError ? error.kind : 'error';
      this.events.throttled('rate_limit.backend_error', kind, {
        route,
        shadow: true,
        message: messageOf(error),
      });
    }
  }

  private outcome(
    decision: Decision,
    enforcing: { rule: Rule; entry: LimitEntry }[],
  ): RequestOutcome {
    const shown: HeaderPolicy[] = [];
    decision.policies.forEach((p, i) => {
      const { rule, entry } = enforcing[i]!;
      if (rule.headers) shown.push({ ...p, periodMs: (entry.policy as Policy).periodMs });
    });
    const headers = this.headerOptions === false ? {} : rateLimitHeaders(shown, this.headerOptions);
    if (decision.allowed) return { allowed: true, headers, decision };
    const retryAfter = retryAfterSeconds(decision.policies);
    const denying = enforcing.filter((_, i) => !decision.policies[i]!.allowed);
    const exposeDetails = denying.every((e) => e.rule.exposeDetails);
    const { errorMessage } = this.options;
    const message = typeof errorMessage === 'function' ? errorMessage(decision) : errorMessage;
    return {
      allowed: false,
      headers:
        retryAfter === undefined ? headers : { ...headers, 'Retry-After': String(retryAfter) },
      refusal: { status: 429, body: tooManyRequestsBody(retryAfter, { message, exposeDetails }) },
      decision,
    };
  }

  /** The store did not answer: fail-closed policies refuse with 503, the rest admit. */
  private failure(enforced: Rule[]): RequestOutcome {
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
    if (policy && algorithm !== undefined && policy.algorithm !== algorithm) {
      policy = declare(policy, { ...options, algorithm }, declared.where).policy;
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

function isDecision(value: unknown): value is Decision {
  return typeof value === 'object' && value !== null && 'policies' in value;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Identities in logs are hashed: they may be API keys or personal data. */
function hashed(identity: string): string {
  return createHash('sha256').update(identity).digest('base64url').slice(0, 12);
}
