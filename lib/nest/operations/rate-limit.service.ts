import { Inject, Injectable, Optional } from '@nestjs/common';
import type { ControlEntries } from '../../core/operator/control.js';
import type { InspectedPolicy } from '../../core/operator/inspect.js';
import type { ConsumeOptions, LimitEntry, Policies } from '../../core/limiter.js';
import { RateLimiter } from '../../core/limiter.js';
import type { Decision, Policy, PolicyInput } from '../../core/model/policy.js';
import type { RateInput } from '../../core/model/rate.js';
import {
  ControlChanges,
  type ExemptionOptions,
  type OverrideOptions,
  type RemovalOptions,
} from './control-changes.js';
import { RateLimitEvents } from '../observability/events.js';
import { InstanceCount } from '../module/instances.js';
import { RoutePlanner } from '../plan/planner.js';
import { ConnectionLimiter, type ConnectionLimitOptions } from '../transports/ws-connection.js';

export type { ExemptionOptions, OverrideOptions, RemovalOptions } from './control-changes.js';

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
  private connections: ConnectionLimiter | undefined;
  private readonly controls: ControlChanges;

  constructor(
    @Inject(RateLimiter) readonly limiter: RateLimiter,
    @Optional() @Inject(RoutePlanner) private readonly runtime?: RoutePlanner,
  ) {
    this.controls = new ControlChanges(limiter, runtime?.options.ipv6Subnet);
  }

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
      typeof identity === 'string' && identity !== ''
        ? this.controls.identity(identity, 'RateLimitService.reset')
        : identity,
      scope,
    );
  }

  /**
   * Every stored policy state of `identity` (under `scope`, or every scope), read at one
   * instant: key, scope, policy name, algorithm, `resetMs` (ms until full) and the state
   * (GCRA `{ tatMs }`, token bucket `{ tokens }` or `{ debtMs }`, fixed window
   * `{ count, windowEndMs }`, sliding window `{ windowIndex, current, previous }`, on Redis
   * without `windowIndex` for a policy it does not know, sliding log `{ hitsMs }`). For the
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
    identity = this.controls.identity(identity, 'RateLimitService.inspect');
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
  setOverride(
    identity: string,
    scope: string,
    rate: RateInput,
    options: OverrideOptions,
  ): Promise<void> {
    return this.controls.setOverride(identity, scope, rate, options);
  }

  /**
   * Ends the override of `scope` (or `'*'`) and `options.policy` (default `'*'`) now.
   * @returns whether there was one in force
   * @throws like {@link RateLimitService.setOverride}
   */
  removeOverride(
    identity: string,
    scope: string,
    options: { policy?: string } & RemovalOptions = {},
  ): Promise<boolean> {
    return this.controls.removeOverride(identity, scope, options);
  }

  /**
   * The overrides and the exemption in force for `identity`, with the ms left on each.
   * @throws {RateLimitConfigError} for an invalid identity, or a store without `control`
   * @throws {RateLimitBackendError} when the store fails
   */
  listOverrides(identity: string): Promise<ControlEntries> {
    return this.controls.listOverrides(identity);
  }

  /**
   * Exempts `identity` from every policy for `ttlMs`: its requests are admitted and
   * spend nothing.
   * @throws {RateLimitConfigError} for an invalid identity, `ttlMs` or reason, or a store
   *   without `control`
   * @throws {RateLimitBackendError} when the store fails
   */
  exempt(identity: string, options: ExemptionOptions): Promise<void> {
    return this.controls.exempt(identity, options);
  }

  /**
   * Ends the exemption of `identity` now.
   * @returns whether there was one in force
   * @throws like {@link RateLimitService.listOverrides}
   */
  removeExemption(identity: string, options: RemovalOptions = {}): Promise<boolean> {
    return this.controls.removeExemption(identity, options);
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
    // A service made outside the module (`new RateLimitService(limiter)`) limits with the
    // module's defaults.
    this.connections ??= new ConnectionLimiter(
      this.runtime ??
        new RoutePlanner(
          this.limiter,
          {},
          new RateLimitEvents(),
          new InstanceCount(undefined, undefined, false, '', undefined),
          undefined,
          undefined,
        ),
    );
    return this.connections.limit(client, rate, options);
  }
}
