import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import {
  checkActor,
  checkOverridePolicy,
  checkOverrideScope,
  checkReason,
  checkTtlMs,
  EXEMPT_FIELD,
  overrideField,
  overrideValue,
  readControl,
  type ControlEntries,
} from '../core/control.js';
import { quote, RateLimitConfigError } from '../core/errors.js';
import type { InspectedPolicy } from '../core/inspect.js';
import { controlKey } from '../core/keys.js';
import type { ConsumeOptions, LimitEntry, Policies } from '../core/limiter.js';
import { RateLimiter } from '../core/limiter.js';
import type { Decision, Policy, PolicyInput } from '../core/policy.js';
import { formatRate, type RateInput } from '../core/rate.js';
import type { ControlChange, ControlSnapshot } from '../core/stores/store.js';
import { canonicalIdentity } from '../http/identities.js';
import { hashIdentity as hashed, RateLimitEvents } from './events.js';
import { RateLimitRuntime } from './runtime.js';
import { ConnectionLimiter, type ConnectionLimitOptions } from './transports/ws-connection.js';

/** Options of {@link RateLimitService.setOverride}. */
export interface OverrideOptions {
  /** The policy name it applies to; `'*'` (the default) for every policy of the scope. */
  policy?: string;
  /** How long it lasts, in **ms**: an integer from 1 to 2^31-1 (about 24.8 days). */
  ttlMs: number;
  /** Why, for the audit log and the listing: 1 to 200 characters. */
  reason: string;
  /** Capacity of token-bucket and GCRA policies while it lasts (ignored by the windows). Default: the limit. */
  burst?: number;
  /** Who made the change (an operator's name or id), for the audit line: 1 to 200 characters. */
  actor?: string;
}

/** Options of {@link RateLimitService.exempt}. */
export interface ExemptionOptions {
  /** How long it lasts, in **ms**: an integer from 1 to 2^31-1. */
  ttlMs: number;
  /** Why, for the audit log and the listing: 1 to 200 characters. */
  reason: string;
  /** Who made the change (an operator's name or id), for the audit line: 1 to 200 characters. */
  actor?: string;
}

/** Options of {@link RateLimitService.removeOverride} and {@link RateLimitService.removeExemption}. */
export interface RemovalOptions {
  /** Who made the change (an operator's name or id), for the audit line: 1 to 200 characters. */
  actor?: string;
}

/**
 * The limiter for code that is not an HTTP route (jobs, webhooks, queue consumers), and
 * the operator's tools: inspect, reset, overrides and exemptions. Same store, prefix and
 * failure settings as the guard.
 *
 * Overrides and exemptions live in the identity's control hash (`controlKey`), written
 * atomically on the store's clock (the Redis server's); each ends by itself after its
 * `ttlMs`. Every change logs one audit line through Nest's `Logger` (context `RateLimit`):
 * `rate_limit.override_set`, `rate_limit.override_removed`, `rate_limit.exemption_set` or
 * `rate_limit.exemption_removed`, with the identity hashed.
 */
@Injectable()
export class RateLimitService {
  private readonly logger = new Logger('RateLimit');
  private connections: ConnectionLimiter | undefined;

  constructor(
    @Inject(RateLimiter) readonly limiter: RateLimiter,
    @Optional() @Inject(RateLimitRuntime) private readonly runtime?: RateLimitRuntime,
  ) {}

  /** See {@link RateLimiter.consume}. */
  consume(identity: string, policies: Policies, options?: ConsumeOptions): Promise<Decision> {
    return this.limiter.consume(identity, policies, options);
  }

  /**
   * Limits something that is not an HTTP request: spends `cost` (default 1) under every
   * policy, all-or-nothing. The same as {@link RateLimitService.consume}.
   *
   * ```ts
   * const decision = await limits.check(`tenant:${id}`, { name: 'webhooks', rate: '100/m' }, { scope: 'webhooks' });
   * if (!decision.allowed) {
   *   const waitMs = Math.max(...decision.policies.map((p) => p.retryAfterMs)); // Infinity: never
   *   return queue.retryLater(job, waitMs);
   * }
   * ```
   * @throws {RateLimitConfigError} for an invalid policy, cost or scope
   * @throws {RateLimitBackendError} when the store fails or exceeds `timeoutMs`
   */
  check(identity: string, policies: Policies, options?: ConsumeOptions): Promise<Decision> {
    return this.limiter.consume(identity, policies, options);
  }

  /** See {@link RateLimiter.consumeEach}. */
  consumeEach(entries: readonly LimitEntry[], options?: ConsumeOptions): Promise<Decision> {
    return this.limiter.consumeEach(entries, options);
  }

  /**
   * Reads the policies' state for `identity` without spending anything: `remaining` and
   * `resetMs` (ms) per policy. See {@link RateLimiter.peek}.
   *
   * ```ts
   * const { policies } = await limits.peek(`tenant:${id}`, { name: 'webhooks', rate: '100/m' }, { scope: 'webhooks' });
   * ```
   * @throws like {@link RateLimitService.check}
   */
  peek(
    identity: string,
    policies: Policies,
    options?: Omit<ConsumeOptions, 'cost'>,
  ): Promise<Decision> {
    return this.limiter.peek(identity, policies, options);
  }

  /**
   * Forgets what `identity` has spent (under `scope`, or every scope): its next request is
   * admitted. Overrides and exemptions are kept. On Cluster only the identity's slot is read.
   * An `ip:` identity may be written in any spelling of the address (`ip:2001:0db8::1`,
   * `ip:2001:db8::/64`): it is reduced as the guard reduces it (`ipv6Subnet`).
   * @returns how many keys were deleted
   * @throws {RateLimitConfigError} for an invalid scope
   * @throws {RateLimitBackendError} when the store fails or takes more than 30 s
   */
  reset(identity: string, scope?: string): Promise<number> {
    // A bad identity is the limiter's to refuse, with its own message.
    return this.limiter.reset(
      typeof identity === 'string' ? this.canonical(identity) : identity,
      scope,
    );
  }

  /**
   * Every stored policy state of `identity` (under `scope`, or every scope), read at one
   * instant: key, scope, policy name, algorithm, `resetMs` (ms until full) and the state
   * (GCRA `{ tatMs }`, token bucket `{ tokens }` or `{ debtMs }`, fixed window
   * `{ count, windowEndMs }`, sliding window `{ windowIndex, current, previous }`). For the
   * policies the module knows (its default and every route's static `@RateLimit`), the
   * `policies` given, or those under an override, also `limit` and `remaining`.
   * @throws {RateLimitConfigError} for an invalid scope, or a store without `inspect`
   * @throws {RateLimitBackendError} when the store fails or takes more than 30 s
   */
  inspect(
    identity: string,
    scope?: string,
    policies?: readonly (Policy | PolicyInput)[],
  ): Promise<InspectedPolicy[]> {
    checkIdentity(identity, 'RateLimitService.inspect');
    identity = this.canonical(identity);
    return this.limiter.inspect(identity, {
      scope,
      policies,
      known: (s, name, algorithm) => this.runtime?.knownPolicy(s, name, algorithm),
    });
  }

  /**
   * Gives `identity` another rate for `ttlMs`: under policy `options.policy` (default `'*'`,
   * every policy) of `scope` (`'*'`: every scope). Replaces an override of the same scope
   * and policy. When several apply to a policy, the most specific wins: scope and policy,
   * then scope, then policy, then `*:*`.
   *
   * ```ts
   * await limits.setOverride('user:42', '*', '1000/m', { ttlMs: 3_600_000, reason: 'migration, ticket 123' });
   * ```
   * @param rate `'1000/m'` or `{ limit, periodMs }`
   * @throws {RateLimitConfigError} for an invalid identity, scope, policy, rate, burst,
   *   `ttlMs` or reason, or a store without `control`
   * @throws {RateLimitBackendError} when the store fails
   */
  async setOverride(
    identity: string,
    scope: string,
    rate: RateInput,
    options: OverrideOptions,
  ): Promise<void> {
    const where = 'RateLimitService.setOverride';
    checkIdentity(identity, where);
    identity = this.canonical(identity);
    checkOverrideScope(scope, where);
    const { policy = '*', ttlMs, reason, burst, actor } = options ?? ({} as OverrideOptions);
    checkOverridePolicy(policy, where);
    checkActor(actor, where);
    const value = overrideValue(rate, burst, where);
    checkTtlMs(ttlMs, where);
    checkReason(reason, where);
    const [limit, periodMs] = value.split(':');
    await this.change(identity, where, {
      op: 'set',
      field: overrideField(scope, policy),
      value,
      ttlMs,
      reason,
    });
    this.audit('rate_limit.override_set', identity, actor, {
      scope,
      policy,
      rate: formatRate({ limit: Number(limit), periodMs: Number(periodMs) }),
      ...(burst !== undefined && { burst }),
      ttlMs,
      reason,
    });
  }

  /**
   * Ends the override of `scope` (or `'*'`) and `options.policy` (default `'*'`) now.
   * @returns whether there was one in force
   * @throws like {@link RateLimitService.setOverride}
   */
  async removeOverride(
    identity: string,
    scope: string,
    options: { policy?: string } & RemovalOptions = {},
  ): Promise<boolean> {
    const where = 'RateLimitService.removeOverride';
    checkIdentity(identity, where);
    identity = this.canonical(identity);
    checkOverrideScope(scope, where);
    const { policy = '*', actor } = options ?? {};
    checkOverridePolicy(policy, where);
    checkActor(actor, where);
    const { removed = false } = await this.change(identity, where, {
      op: 'remove',
      field: overrideField(scope, policy),
    });
    this.audit('rate_limit.override_removed', identity, actor, { scope, policy, removed });
    return removed;
  }

  /**
   * The overrides and the exemption in force for `identity`, with the ms left on each.
   * @throws {RateLimitConfigError} for an invalid identity, or a store without `control`
   * @throws {RateLimitBackendError} when the store fails
   */
  async listOverrides(identity: string): Promise<ControlEntries> {
    const where = 'RateLimitService.listOverrides';
    checkIdentity(identity, where);
    identity = this.canonical(identity);
    const { nowMs, fields } = await this.change(identity, where, { op: 'get' });
    return readControl(fields, nowMs);
  }

  /**
   * Exempts `identity` from every policy for `ttlMs`: its requests are admitted and
   * spend nothing.
   * @throws {RateLimitConfigError} for an invalid identity, `ttlMs` or reason, or a store
   *   without `control`
   * @throws {RateLimitBackendError} when the store fails
   */
  async exempt(identity: string, options: ExemptionOptions): Promise<void> {
    const where = 'RateLimitService.exempt';
    checkIdentity(identity, where);
    identity = this.canonical(identity);
    const { ttlMs, reason, actor } = options ?? ({} as ExemptionOptions);
    checkTtlMs(ttlMs, where);
    checkReason(reason, where);
    checkActor(actor, where);
    await this.change(identity, where, { op: 'set', field: EXEMPT_FIELD, ttlMs, reason });
    this.audit('rate_limit.exemption_set', identity, actor, { ttlMs, reason });
  }

  /**
   * Ends the exemption of `identity` now.
   * @returns whether there was one in force
   * @throws like {@link RateLimitService.listOverrides}
   */
  async removeExemption(identity: string, options: RemovalOptions = {}): Promise<boolean> {
    const where = 'RateLimitService.removeExemption';
    checkIdentity(identity, where);
    identity = this.canonical(identity);
    const { actor } = options ?? {};
    checkActor(actor, where);
    const { removed = false } = await this.change(identity, where, {
      op: 'remove',
      field: EXEMPT_FIELD,
    });
    this.audit('rate_limit.exemption_removed', identity, actor, { removed });
    return removed;
  }

  /**
   * Limits WebSocket connection attempts per client IP (`ip:` identity, scope `connection`):
   * call it first in a gateway's `handleConnection`, where guards do not run. A refused client
   * gets the `exception` event of a refused message (`retryAfter` in **seconds**) and is
   * disconnected (socket.io `disconnect()`, ws close code 1008). A store failure admits
   * (logged), or refuses with 503 when fail-closed. See {@link ConnectionLimitOptions}.
   *
   * ```ts
   * if (!(await this.limits.limitConnection(client, '10/m'))) return;
   * ```
   * @param client the socket.io `Socket` or the ws `WebSocket`
   * @param rate `'10/m'` or `{ limit, periodMs }`
   * @returns true when admitted; false when refused (the client is being disconnected)
   * @throws {RateLimitConfigError} (a rejection) for an invalid rate or scope
   */
  limitConnection(
    client: object,
    rate: RateInput,
    options?: ConnectionLimitOptions,
  ): Promise<boolean> {
    this.connections ??= new ConnectionLimiter(
      this.limiter,
      this.runtime?.options ?? {},
      new RateLimitEvents(),
    );
    return this.connections.limit(client, rate, options);
  }

  private change(identity: string, where: string, change: ControlChange): Promise<ControlSnapshot> {
    const store = this.limiter.store;
    if (typeof store.control !== 'function') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OPTION',
        'this rate-limit store keeps no overrides or exemptions: implement RateLimitStore.control',
        where,
      );
    }
    const key = controlKey(this.limiter.prefix, identity);
    // A denial remembered here may no longer hold under the new override or exemption
    // (forgotten again once written: a request may have remembered one meanwhile).
    this.limiter.forgetDenials(identity);
    return this.limiter
      .operate(() => store.control!(key, change))
      .finally(() => this.limiter.forgetDenials(identity));
  }

  /**
   * An `ip:` identity in the guard's own spelling, so `reset('ip:2001:0db8::1')` finds the
   * keys of `ip:2001:db8::/64` (per the module's `ipv6Subnet`).
   */
  private canonical(identity: string): string {
    return canonicalIdentity(identity, this.runtime?.options.ipv6Subnet);
  }

  /**
   * One audit line per change, identity hashed (it may be an API key or personal data); the
   * actor in clear, since an audit line is there to say who.
   */
  private audit(
    event: string,
    identity: string,
    actor: string | undefined,
    detail: Record<string, unknown>,
  ): void {
    const line = { identity: hashed(identity), ...(actor !== undefined && { actor }), ...detail };
    this.logger.log(`${event} ${JSON.stringify(line)}`);
  }
}

function checkIdentity(identity: unknown, where: string): asserts identity is string {
  if (typeof identity !== 'string' || identity === '') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid identity ${quote(identity)}: expected a non-empty string`,
      where,
    );
  }
}
