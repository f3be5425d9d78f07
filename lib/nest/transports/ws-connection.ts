import { declare } from '../declare/decorators.js';
import { keys } from '../declare/keys.js';
import type { RateInput } from '../../core/model/rate.js';
import { ipIdentity } from '../../http/identities.js';
import type { StoreFailureMode } from '../declare/decorators.js';
import type { RoutePlan } from '../pipeline/call.js';
import { Gate } from '../pipeline/stages/gate.js';
import type { RoutePlanner } from '../plan/planner.js';
import { handshakeOf, recordHandshake, wsErrorOf, type HandshakeRequest } from './ws.js';
import type { WsRateLimitError } from './ws.js';

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
  /**
   * Refuse (503) when the store is unreachable. Default: the module's `onStoreFailure`, else
   * its `failClosed` (admit).
   */
  failClosed?: boolean;
  /**
   * What happens while the store fails, as for routes: `'open'` admits, `'closed'` refuses
   * (503, close code 1013), `'local'` enforces this process's share of the limit in memory
   * (insurance limits). Wins over `failClosed`. Default: the module's. With `'local'`, set the
   * module's `instances` unless a route has a `'local'` policy too: otherwise the number of
   * processes is learned only from the first such connection limit, and a process that never
   * reached the store then allows 1 connection per period.
   */
  onStoreFailure?: StoreFailureMode;
}

/** WebSocket close codes (RFC 6455 §7.4.1): policy violation; try again later. */
const CLOSE_LIMITED = 1008;
const CLOSE_UNAVAILABLE = 1013;

/** The policy name of connection limits, in Redis keys and logs. */
const POLICY = 'connection';

const WHERE = 'RateLimitService.limitConnection';

/** Connection plans kept (by rate, scope and failure mode). */
const MAX_PLANS = 256;

/**
 * Connection attempts per client IP, for gateways (guards do not run on `handleConnection`),
 * through the same stages as a route: gate (kill switch, allow-list) → identify (the
 * handshake's address) → enforce → on store failure → shadow → shape. The module's store,
 * prefix, algorithm, `trustedProxies`, `ipv6Subnet`, `mode`, `enabled`, failure modes and
 * observation apply, and operators' overrides and exemptions of the `ip:` identity too.
 */
export class ConnectionLimiter {
  /** Plans by rate and options, compiled once each; the oldest go first beyond 256. */
  private readonly plans = new Map<string, RoutePlan>();
  private readonly gate: Gate;

  constructor(private readonly planner: RoutePlanner) {
    this.gate = new Gate(planner.options, planner.events, planner.allowList);
  }

  /** See {@link RateLimitService.limitConnection}. */
  async limit(
    client: object,
    rate: RateInput,
    options: ConnectionLimitOptions = {},
  ): Promise<boolean> {
    const plan = this.planOf(rate, options);
    if (options.request) recordHandshake(client, options.request);
    if (this.gate.off) return true;
    const handshake = handshakeOf(client);
    if (!(await this.gate.passes(handshake, () => false))) return true;
    const identity = ipIdentity(handshake, this.planner.options);
    // A connection has no execution context: its policy is fixed, so no stage reads one.
    const outcome = await plan.decide(undefined, () => identity);
    if (outcome.allowed) return true;
    disconnect(client, wsErrorOf(outcome.refusal!));
    return false;
  }

  /** @throws {RateLimitConfigError} for an invalid rate, scope or option */
  private planOf(rate: RateInput, options: ConnectionLimitOptions): RoutePlan {
    const scope = options.scope ?? POLICY;
    const id = JSON.stringify([rate, scope, options.failClosed, options.onStoreFailure]);
    let plan = this.plans.get(id);
    if (plan === undefined) {
      const declared = declare(
        rate,
        {
          name: POLICY,
          scope,
          key: keys.ip,
          headers: false,
          ...(options.failClosed !== undefined && { failClosed: options.failClosed }),
          ...(options.onStoreFailure !== undefined && { onStoreFailure: options.onStoreFailure }),
        },
        WHERE,
      );
      plan = this.planner.planOfPolicies(scope, [declared]);
      // Scopes come from the gateway's code, but may be built from anything: bounded.
      if (this.plans.size >= MAX_PLANS) this.plans.delete(this.plans.keys().next().value!);
      this.plans.set(id, plan);
    }
    return plan;
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
