import { RateLimitConfigError, RateLimitBackendError } from '../../core/errors.js';
import type { RateLimiter } from '../../core/limiter.js';
import { resolvePolicy, type Policy } from '../../core/policy.js';
import type { RateInput } from '../../core/rate.js';
import { retryAfterSeconds } from '../../http/headers.js';
import { AllowList } from '../../http/allow-list.js';
import { ipIdentity } from '../../http/identities.js';
import { serviceUnavailableBody, tooManyRequestsBody } from '../../http/responses.js';
import { hashIdentity, messageOf, RATE_LIMIT_EVENTS, type RateLimitEvents } from '../observability/events.js';
import { KillSwitch } from '../pipeline/kill-switch.js';
import type { RateLimitModuleOptions } from '../module/options.js';
import {
  handshakeOf,
  recordHandshake,
  wsErrorOf,
  type HandshakeRequest,
  type WsRateLimitError,
} from './ws.js';

/** Options of {@link RateLimitService.limitConnection}. */
export interface ConnectionLimitOptions {
  /**
   * `@nestjs/platform-ws` only: the upgrade request, `handleConnection`'s second argument.
   * Its headers give `X-Forwarded-For` under `trustedProxies` (see `recordHandshake`);
   * without it the TCP peer's address applies. socket.io needs none.
   */
  request?: HandshakeRequest;
  /**
   * The budget: connections to every gateway that names the same scope share one. Default
   * `'connection'` (one budget per client IP for all gateways).
   */
  scope?: string;
  /** Refuse (503) when the store is unreachable. Default: the module's `failClosed` (admit). */
  failClosed?: boolean;
}

/** WebSocket close codes (RFC 6455 §7.4.1): policy violation; try again later. */
const CLOSE_LIMITED = 1008;
const CLOSE_UNAVAILABLE = 1013;

/** The policy name of connection limits, in Redis keys and logs. */
const POLICY = 'connection';

/**
 * Connection attempts per client IP, for gateways (guards do not run on `handleConnection`).
 * The module's store, prefix, algorithm, `trustedProxies`, `ipv6Subnet`, `mode` and
 * `enabled` apply, and operators' overrides and exemptions of the `ip:` identity too.
 */
export class ConnectionLimiter {
  /** Policies of the rates given as strings, validated once each. */
  private readonly policies = new Map<string, Policy>();

  /** The module's `allowList`: clients on it are never limited here either. */
  private readonly allowList: AllowList | undefined;
  private readonly killSwitch: KillSwitch;

  constructor(
    private readonly limiter: RateLimiter,
    private readonly options: RateLimitModuleOptions,
    private readonly events: RateLimitEvents,
  ) {
    this.allowList =
      options.allowList === undefined
        ? undefined
        : new AllowList(options.allowList, options, 'RateLimitModule options');
    this.killSwitch = new KillSwitch((error) => events.configError('enabled', error));
  }

  /** See {@link RateLimitService.limitConnection}. */
  async limit(
    client: object,
    rate: RateInput,
    options: ConnectionLimitOptions = {},
  ): Promise<boolean> {
    const policy = this.policyOf(rate);
    if (options.request) recordHandshake(client, options.request);
    const { enabled, mode } = this.options;
    if (
      enabled === false ||
      (typeof enabled === 'function' && !(await this.killSwitch.on(enabled)))
    )
      return true;
    const handshake = handshakeOf(client);
    if (this.allowList?.allows(handshake) === true) return true;
    const identity = ipIdentity(handshake, this.options);
    const scope = options.scope ?? POLICY;
    let refusal: WsRateLimitError;
    try {
      const decision = await this.limiter.consume(identity, policy, { scope });
      if (decision.allowed) return true;
      const retryAfter = retryAfterSeconds(decision.policies);
      const detail = () => ({
        route: scope,
        identity: hashIdentity(identity),
        policies: [POLICY],
        cost: 1,
        retryAfterMs: decision.policies[0]!.retryAfterMs,
      });
      if (mode === 'shadow') {
        this.events.shadowBlocked(scope, identity, () => ({ ...detail(), policy: POLICY }));
        return true;
      }
      this.events.blocked(scope, identity, detail);
      refusal = wsErrorOf({ status: 429, body: tooManyRequestsBody(retryAfter) });
    } catch (error) {
      if (error instanceof RateLimitConfigError) throw error;
      this.events.throttled(
        RATE_LIMIT_EVENTS.backendError,
        error instanceof RateLimitBackendError ? error.kind : 'error',
        { route: scope, message: messageOf(error) },
      );
      if (!(options.failClosed ?? this.options.failClosed ?? false) || mode === 'shadow')
        return true;
      refusal = wsErrorOf({ status: 503, body: serviceUnavailableBody() });
    }
    disconnect(client, refusal);
    return false;
  }

  /** @throws {RateLimitConfigError} for an invalid rate */
  private policyOf(rate: RateInput): Policy {
    const input = { name: POLICY, rate, algorithm: this.options.algorithm };
    if (typeof rate !== 'string') return resolvePolicy(input, 'RateLimitService.limitConnection');
    let policy = this.policies.get(rate);
    if (policy === undefined) {
      policy = resolvePolicy(input, 'RateLimitService.limitConnection');
      this.policies.set(rate, policy);
    }
    return policy;
  }
}

type Closable = {
  readyState?: unknown;
  send?: (data: string) => void;
  close?: (code: number, reason: string) => void;
  emit?: (event: string, payload: unknown) => void;
  disconnect?: () => void;
};

/**
 * Tells the client why, the way a refused message is told (the `exception` event), then
 * closes it. socket.io: `disconnect()` of the namespace, which the client sees as
 * `io server disconnect` and does not reconnect from by itself. ws: close code 1008 (or
 * 1013 for a 503) with the error as the reason.
 */
function disconnect(client: object, refusal: WsRateLimitError): void {
  const c = client as Closable;
  if (typeof c.readyState === 'number' && typeof c.send === 'function') {
    c.send(JSON.stringify({ event: 'exception', data: refusal }));
    c.close?.(refusal.status === 429 ? CLOSE_LIMITED : CLOSE_UNAVAILABLE, refusal.error);
  } else if (typeof c.emit === 'function') {
    c.emit('exception', refusal);
    c.disconnect?.();
  }
}
