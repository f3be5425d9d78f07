import type { LimitEntry } from '../../core/limiter.js';
import type { Priority } from '../../core/overload/types.js';
import type { Decision, PolicyDecision } from '../../core/model/policy.js';
import { hashIdentity } from './events.js';
import type { RateLimitMetrics } from './metrics.js';

/**
 * How a request was decided:
 * - `allowed`: every policy admitted it;
 * - `blocked`: an enforced policy refused it (429);
 * - `shadow_blocked`: admitted, but a shadow policy would have refused it;
 * - `failed_open`: admitted without a decision, because the store did not answer (or a
 *   rate or cost function failed) and the policies fail open;
 * - `failed_closed`: refused with 503 for the same reasons, under a `failClosed` policy;
 * - `shed`: refused with 503 by overload protection (the `overload` option), before any
 *   policy was decided: `policies` is empty, `identity` too, and `priority` says which.
 */
export type DecisionOutcome =
  'allowed' | 'blocked' | 'shadow_blocked' | 'failed_open' | 'failed_closed' | 'shed';

/** One policy's verdict in a {@link DecisionEvent}. Durations in **ms**. */
export interface DecisionEventPolicy extends PolicyDecision {
  /** The identity this policy limits, hashed like {@link DecisionEvent.identity}. */
  identity: string;
  /** Units this request asked of this policy. */
  cost: number;
  /** A shadow policy: its refusal is only reported. */
  shadow: boolean;
}

/**
 * What the `onDecision` module option receives, once per request the guard evaluated
 * (not for skipped routes, routes without a policy, or contexts no transport adapter limits).
 */
export interface DecisionEvent {
  /** `Controller.handler`. */
  route: string;
  /**
   * The identity of the route's first policy, hashed as in the logs (12 characters of
   * base64url SHA-256): identities may be API keys or personal data.
   */
  identity: string;
  /** Whether the request is admitted. */
  allowed: boolean;
  /** Whether shadow policies were decided for this request (see `policies[].shadow`). */
  shadow: boolean;
  /**
   * Every policy the store decided: the enforced ones, then the shadow ones (decided only
   * when the enforced ones admit). Empty when the store did not answer.
   */
  policies: DecisionEventPolicy[];
  /** Units the request asked for (of its first policy; a policy may set its own cost). */
  cost: number;
  /**
   * Time spent in store calls for this request, in **ms**: both calls when shadow policies
   * were decided; a failed call counts until it failed (up to `timeoutMs`); 0 without a call.
   */
  durationMs: number;
  outcome: DecisionOutcome;
  /** Under the `overload` option, a shed call's priority (only on `outcome: 'shed'`). */
  priority?: Priority;
}

/** What the stages gather about one request while they decide, only when it is observed. */
export interface Trace {
  /** Raw identity of the route's first policy. */
  identity: string;
  enforcing?: LimitEntry[];
  decision?: Decision;
  shadowEntries?: LimitEntry[];
  shadowDecision?: Decision;
  /** Duration of the enforced store call, in ms, whether it answered or failed. */
  enforcedMs?: number;
  /** Duration of the shadow store call, in ms, whether it answered or failed. */
  shadowMs?: number;
  /** Kind of the enforced store call's failure. */
  enforcedError?: string;
  /** Kind of the shadow store call's failure. */
  shadowError?: string;
  /** A rate or cost function failed under a fail-closed policy. */
  brokenClosed?: boolean;
}

/** Feeds each decision to the `onDecision` hook and the metrics, whichever is configured. */
export class DecisionObserver {
  constructor(
    private readonly hook: ((event: DecisionEvent) => void) | undefined,
    private readonly metrics: RateLimitMetrics | undefined,
    private readonly reportError: (where: string, error: unknown) => void,
  ) {}

  /** Records one evaluated request. Never throws. */
  finish(route: string, trace: Trace, allowed: boolean): void {
    const metrics = this.metrics;
    if (metrics) record(metrics, trace);
    if (this.hook) this.call(this.hook, toEvent(route, trace, allowed));
  }

  private call(hook: (event: DecisionEvent) => void, event: DecisionEvent): void {
    callDecisionHook(hook, event, (error) => this.reportError('onDecision', error));
  }
}

function record(metrics: RateLimitMetrics, t: Trace): void {
  // The histogram shows how fast the store answers; failures are counted apart.
  if (t.enforcedError !== undefined) metrics.backendError(t.enforcedError);
  else if (t.enforcedMs !== undefined) metrics.storeCall(t.enforcedMs);
  if (t.shadowError !== undefined) metrics.backendError(t.shadowError);
  else if (t.shadowMs !== undefined) metrics.storeCall(t.shadowMs);
  const { decision, shadowDecision } = t;
  if (decision) {
    decision.policies.forEach((p, i) => {
      const outcome = p.allowed ? 'allowed' : 'blocked';
      metrics.decision(
        scopeOf(t.enforcing![i]!),
        p.name,
        outcome,
        decision.allowed && nearLimit(p),
      );
    });
  }
  if (shadowDecision) {
    shadowDecision.policies.forEach((p, i) => {
      const outcome = p.allowed ? 'allowed' : 'shadow_blocked';
      metrics.decision(scopeOf(t.shadowEntries![i]!), p.name, outcome, p.allowed && nearLimit(p));
    });
  }
}

/**
 * The scope an entry is counted under, as the limiter keys it: the policy's own, else the
 * entry's (`Controller.handler` or `global`, filled in by the route table).
 */
export function scopeOf(entry: LimitEntry): string {
  return entry.policy.scope ?? entry.scope ?? 'global';
}

/** Less than 20 % of the limit remains (in integers: remaining * 5 < limit). */
function nearLimit(p: PolicyDecision): boolean {
  return p.remaining * 5 < p.limit;
}

/** How a traced request was decided (see {@link DecisionOutcome}). */
export function outcomeOf(t: Trace, allowed: boolean): DecisionOutcome {
  if (!allowed) return t.decision && !t.decision.allowed ? 'blocked' : 'failed_closed';
  // Admitted without any decision: the enforced call failed (or a function did), or the
  // route has only shadow policies and their call failed.
  if (t.enforcedError !== undefined || (t.shadowError !== undefined && t.decision === undefined)) {
    return 'failed_open';
  }
  return t.shadowDecision && !t.shadowDecision.allowed ? 'shadow_blocked' : 'allowed';
}

function toEvent(route: string, t: Trace, allowed: boolean): DecisionEvent {
  let lastRaw: string | undefined;
  let lastHash = '';
  const hash = (raw: string) => {
    if (raw !== lastRaw) {
      lastRaw = raw;
      lastHash = hashIdentity(raw);
    }
    return lastHash;
  };
  const policies: DecisionEventPolicy[] = [];
  const add = (
    decision: Decision | undefined,
    entries: LimitEntry[] | undefined,
    shadow: boolean,
  ) =>
    decision?.policies.forEach((p, i) => {
      const entry = entries![i]!;
      // The spread last: on Node 20, properties added after a spread cost microseconds each.
      policies.push({ identity: hash(entry.identity), cost: entry.cost ?? 1, shadow, ...p });
    });
  add(t.decision, t.enforcing, false);
  add(t.shadowDecision, t.shadowEntries, true);
  return {
    route,
    identity: hash(t.identity),
    allowed,
    shadow: t.shadowEntries !== undefined,
    policies,
    cost: (t.enforcing?.[0] ?? t.shadowEntries?.[0])?.cost ?? 0,
    durationMs: (t.enforcedMs ?? 0) + (t.shadowMs ?? 0),
    outcome: outcomeOf(t, allowed),
  };
}

/**
 * Calls the `onDecision` hook with `event`; what it throws, or an async hook's rejection
 * (never an unhandled rejection), goes to `report`.
 */
export function callDecisionHook(
  hook: (event: DecisionEvent) => void,
  event: DecisionEvent,
  report: (error: unknown) => void,
): void {
  try {
    const result: unknown = hook(event);
    if (typeof (result as Promise<unknown> | undefined)?.then === 'function') {
      (result as Promise<unknown>).then(undefined, report);
    }
  } catch (error) {
    report(error);
  }
}
