import type { Decision, Policy } from '../../core/model/policy.js';
import type { Mutable } from '../../core/call/store-policies.js';
import {
  rateLimitHeaders,
  retryAfterSeconds,
  type HeaderOptions,
  type HeaderPolicy,
} from '../../http/headers.js';
import { hashIdentity, type RateLimitEvents } from '../observability/events.js';
import type { RateLimitModuleOptions } from '../module/options.js';
import type { Rule } from '../plan/rules.js';
import type { Entry } from './entry-resolver.js';
import { refusalOf } from '../transports/refusal.js';
import { NO_LIMIT, type RequestOutcome } from './outcome.js';

/**
 * Builds outcomes from decisions, with the informational headers
 * (draft-ietf-httpapi-ratelimit-headers and `X-RateLimit-*`), a transport-neutral refusal,
 * and the logs of refusals: for the shape stage, and the others that answer (entries,
 * store failure, defer). One per module.
 */
export class OutcomeShaper {
  private readonly headerOptions: HeaderOptions | false;
  /** `'problem'` (`errorFormat: 'problem'`): HTTP renders refusals as RFC 9457 problem details. */
  private readonly format: 'nest' | 'problem';

  constructor(
    private readonly options: RateLimitModuleOptions,
    private readonly events: RateLimitEvents,
  ) {
    this.headerOptions =
      options.headers === false ? false : options.headers === true ? {} : (options.headers ?? {});
    this.format = options.errorFormat === 'problem' ? 'problem' : 'nest';
  }

  /** The outcome of the store's decision on `enforcing`, in the same order. */
  decided(decision: Decision, enforcing: readonly Entry[], route: string): RequestOutcome {
    const shown: HeaderPolicy[] = [];
    const policies = decision.policies;
    for (let i = 0; i < policies.length; i++) {
      const p = policies[i]!;
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
      if (!rule.headers) continue;
      const policy = entry.policy as Policy;
      const header: Mutable<HeaderPolicy> = {
        name: p.name,
        allowed: p.allowed,
        limit: p.limit,
        remaining: p.remaining,
        resetMs: p.resetMs,
        retryAfterMs: p.retryAfterMs,
        periodMs: p.override?.periodMs ?? policy.periodMs,
      };
      if (policy.algorithm === 'concurrency') header.quotaUnit = 'concurrent-requests';
      else if (
        !p.override &&
        (policy.algorithm === 'gcra' || policy.algorithm === 'token-bucket')
      ) {
        header.capacity = policy.capacity;
      }
      shown.push(header);
    }
    const headers = this.headers(shown);
    if (decision.allowed) return { allowed: true, headers, decision, shown };
    const retryAfter = retryAfterSeconds(decision.policies);
    const denying = enforcing.filter((_, i) => !decision.policies[i]!.allowed);
    const exposeDetails = denying.every((e) => e.rule.exposeDetails);
    this.logBlocked(route, decision, enforcing);
    const message = this.errorMessage(decision);
    return {
      allowed: false,
      headers:
        // The spread last (the rate-limit headers have no Retry-After): on Node 20,
        // properties added after a spread cost microseconds each, on every refusal.
        retryAfter === undefined ? headers : { 'Retry-After': String(retryAfter), ...headers },
      refusal: refusalOf({
        status: 429,
        retryAfter,
        message,
        exposeDetails,
        policies: denying.map((e) => e.rule.name),
        format: this.format,
      }),
      decision,
      shown,
    };
  }

  /**
   * The outcome of a request decided in two steps (policies that need the user after the
   * route's guards): the second's verdict and refusal, with headers over the policies of both.
   */
  combine(first: RequestOutcome, second: RequestOutcome): RequestOutcome {
    const combined = this.combineHeaders(first, second);
    // The slots of both decisions end with the request (the second's are registered apart).
    return first.release && combined.release !== first.release
      ? { ...combined, release: first.release }
      : combined;
  }

  private combineHeaders(first: RequestOutcome, second: RequestOutcome): RequestOutcome {
    if (!first.shown?.length) return second;
    if (!second.shown?.length) return second.allowed ? first : second;
    const shown = [...first.shown, ...second.shown];
    const retryAfter = second.headers['Retry-After'];
    const headers = this.headers(shown);
    return {
      ...second,
      headers: retryAfter === undefined ? headers : { ...headers, 'Retry-After': retryAfter },
      shown,
    };
  }

  private headers(shown: HeaderPolicy[]): Record<string, string> {
    return this.headerOptions === false ? {} : rateLimitHeaders(shown, this.headerOptions);
  }

  /**
   * The outcome when the store does not answer: fail-closed policies refuse with 503 and
   * `Retry-After: 1`, the rest admit. A new one each time: a `refuse` of your own may add
   * to its headers.
   */
  failure(enforced: readonly Rule[]): RequestOutcome {
    if (!enforced.some((r) => r.failClosed)) return NO_LIMIT;
    return this.unavailable();
  }

  /** The 503 of a fail-closed policy without its store, `Retry-After: 1`. */
  unavailable(): RequestOutcome {
    return {
      allowed: false,
      headers: { 'Retry-After': '1' },
      refusal: refusalOf({
        status: 503,
        retryAfter: 1,
        exposeDetails: true,
        policies: [],
        format: this.format,
      }),
    };
  }

  /** One `rate_limit.blocked` per identity that refused (usually one), throttled per (route, identity). */
  private logBlocked(route: string, decision: Decision, enforcing: readonly Entry[]): void {
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
      this.events.configError('errorMessage', error);
      return undefined;
    }
  }
}
