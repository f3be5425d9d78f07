import type { LimitEntry } from '../../core/limiter.js';
import { quote, RateLimitConfigError } from '../../core/errors.js';
import type { Decision, PolicyDecision } from '../../core/model/policy.js';
import { hashIdentity } from './events.js';
import { outcomeOf, scopeOf, type Trace } from './observer.js';

/** The parts of an OpenTelemetry span used here (typed by shape: the API is an optional peer). */
export interface OtelSpan {
  isRecording(): boolean;
  setAttributes(attributes: Record<string, string | number | string[]>): unknown;
}

/** The parts of `@opentelemetry/api`'s `trace` used here (1.2 and later). */
export interface OtelTraceApi {
  getActiveSpan(): OtelSpan | undefined;
}

/** Loads `@opentelemetry/api`; replaced in tests to simulate it missing. */
export type OtelApiLoader = () => Promise<unknown>;

const WHERE = 'RateLimitModule options';

/**
 * Loads `@opentelemetry/api` once, at bootstrap, as the `tracing` option asks: `false` never
 * loads it; unset uses it when it is installed and is off otherwise; `true` requires it.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_PEER_DEPENDENCY` with `tracing: true` when the API
 *   cannot be loaded (or is older than 1.2)
 */
export async function createTracing(
  tracing: boolean | undefined,
  // webpackIgnore: bundlers must not require the API at build time; it is optional.
  load: OtelApiLoader = () => import(/* webpackIgnore: true */ '@opentelemetry/api'),
): Promise<DecisionTracing | undefined> {
  if (tracing === false) return undefined;
  let why: string;
  try {
    const loaded = (await load()) as { trace?: OtelTraceApi; default?: { trace?: OtelTraceApi } };
    const api = loaded.trace ?? loaded.default?.trace;
    if (typeof api?.getActiveSpan === 'function') return new DecisionTracing(api);
    why = 'it has no trace.getActiveSpan: version 1.2 or later is needed';
  } catch (error) {
    why = error instanceof Error ? error.message : String(error);
  }
  if (tracing !== true) return undefined;
  throw new RateLimitConfigError(
    'ERR_RATE_LIMIT_PEER_DEPENDENCY',
    `tracing ${quote(tracing)} needs the optional peer dependency @opentelemetry/api: install it (npm install @opentelemetry/api) or remove the tracing option (${why})`,
    WHERE,
  );
}

/**
 * Adds each decision to the active span as `ratelimit.*` attributes; never creates a span.
 * The identity goes in hashed only, as in the logs.
 */
export class DecisionTracing {
  constructor(private readonly api: OtelTraceApi) {}

  /**
   * The span to annotate: the active one when it records; undefined otherwise, which is every
   * request when no SDK is registered (the API's no-op), so they pay this call only.
   */
  activeSpan(): OtelSpan | undefined {
    const span = this.api.getActiveSpan();
    return span?.isRecording() ? span : undefined;
  }

  /** Sets the attributes of one decided request on `span`. Never throws. */
  annotate(span: OtelSpan, trace: Trace, allowed: boolean): void {
    try {
      span.setAttributes(attributesOf(trace, allowed));
    } catch {
      // A span that refuses attributes must not fail the request; nothing to report it to.
    }
  }
}

/** One decided policy with the entry it was asked for. */
type Decided = { p: PolicyDecision; entry: LimitEntry };

/**
 * The attributes of one request. Stacked policies: the one that explains the outcome gives
 * `ratelimit.policy`, `scope`, `limit`, `remaining` and `retry_after_ms` (the refusing
 * policy with the longest wait, else the most restrictive: lowest remaining, ties the
 * longest reset); `ratelimit.policies` names every policy decided (or attempted).
 */
function attributesOf(t: Trace, allowed: boolean): Record<string, string | number | string[]> {
  const outcome = outcomeOf(t, allowed);
  const enforced = decided(t.decision, t.enforcing);
  const shadow = decided(t.shadowDecision, t.shadowEntries);
  let shown: Decided | undefined;
  if (outcome === 'blocked') shown = longestWait(enforced);
  else if (outcome === 'shadow_blocked') shown = longestWait(shadow);
  else shown = mostRestrictive(enforced.length > 0 ? enforced : shadow);
  const entries = [...(t.enforcing ?? []), ...(t.shadowEntries ?? [])];
  const entry = shown?.entry ?? entries[0];
  const attributes: Record<string, string | number | string[]> = {
    'ratelimit.outcome': outcome,
    'ratelimit.identity_hash': hashIdentity(entry?.identity ?? t.identity),
  };
  if (entry) {
    attributes['ratelimit.policy'] = entry.policy.name ?? 'default';
    attributes['ratelimit.scope'] = scopeOf(entry);
    attributes['ratelimit.policies'] = entries.map((e) => e.policy.name ?? 'default');
  }
  if (shown) {
    attributes['ratelimit.limit'] = shown.p.limit;
    attributes['ratelimit.remaining'] = shown.p.remaining;
    // Infinity (a cost above the capacity: no wait helps) is no value an exporter keeps.
    if (shown.p.retryAfterMs !== Infinity) {
      attributes['ratelimit.retry_after_ms'] = shown.p.retryAfterMs;
    }
  }
  const reason = outcome === 'blocked' ? t.decision?.reason : undefined;
  if (reason) attributes['ratelimit.reason'] = reason;
  const error = t.enforcedError ?? t.shadowError;
  if (error !== undefined) attributes['ratelimit.backend_error'] = error;
  return attributes;
}

function decided(decision: Decision | undefined, entries: LimitEntry[] | undefined): Decided[] {
  return decision ? decision.policies.map((p, i) => ({ p, entry: entries![i]! })) : [];
}

function longestWait(all: Decided[]): Decided | undefined {
  let best: Decided | undefined;
  for (const d of all) {
    if (!d.p.allowed && (!best || d.p.retryAfterMs > best.p.retryAfterMs)) best = d;
  }
  return best;
}

function mostRestrictive(all: Decided[]): Decided | undefined {
  let best: Decided | undefined;
  for (const d of all) {
    const { remaining, resetMs } = d.p;
    if (
      !best ||
      remaining < best.p.remaining ||
      (remaining === best.p.remaining && resetMs > best.p.resetMs)
    ) {
      best = d;
    }
  }
  return best;
}
