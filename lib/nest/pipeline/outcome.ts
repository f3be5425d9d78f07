import type { Decision, Policy } from '../../core/policy.js';
import type { Mutable } from '../../core/store-policies.js';
import {
  rateLimitHeaders,
  retryAfterSeconds,
  type HeaderOptions,
  type HeaderPolicy,
} from '../../http/headers.js';
import {
  quotaExceededProblem,
  serviceUnavailableBody,
  temporaryReducedCapacityProblem,
  tooManyRequestsBody,
  type ProblemDetails,
} from '../../http/responses.js';
import { hashIdentity, type RateLimitEvents } from '../observability/events.js';
import type { RateLimitModuleOptions } from '../module/options.js';
import type { Entry } from './entries.js';
import type { Rule } from '../plan/routes.js';

/**
 * What the guard decided for one request (or one GraphQL field, WebSocket message, RPC
 * call): stored on the transport's carrier, so a call guarded twice counts once.
 */
export interface RequestOutcome {
  /** Admit the request. */
  readonly allowed: boolean;
  /** Informational headers to send (empty in shadow mode or when the store failed). */
  readonly headers: Record<string, string>;
  /**
   * When refused: status 429 (limited) or 503 (a fail-closed policy's store is down) and
   * its HTTP body (`retryAfter` in **seconds**); transports without statuses carry both in
   * their own error. With `errorFormat: 'problem'`, `problem` is the RFC 9457 body the HTTP
   * transport sends instead; the other transports keep to `body`.
   */
  readonly refusal?: { status: 429 | 503; body: object; problem?: ProblemDetails };
  /** The enforced decision, when the store answered. */
  readonly decision?: Decision;
  /** The policies the headers describe (those that send headers), as the store decided them. */
  readonly shown?: readonly HeaderPolicy[];
  /**
   * On a route that counts by outcome (`count`), when something was spent: gives back what
   * the response's status says should not have counted. Called once the response is sent.
   */
  readonly settle?: (status: number) => void;
  /**
   * Under concurrency limits, when slots were taken: gives them back (once, however often
   * called). Called when the request ends: its response is sent, it fails, or its
   * connection closes (HTTP), or its handler's result settles (other transports).
   */
  readonly release?: () => void;
}

/** Admitted without a decision: no policy, skipped, or failed open. */
export const NO_LIMIT: RequestOutcome = { allowed: true, headers: {} };

// A registered symbol: a request guarded by a CommonJS and an ESM copy of the package is
// still counted once.
const STORED = Symbol.for('nest-rate-limit:outcome');

type Carrier = { [STORED]?: RequestOutcome | Promise<RequestOutcome> };

/** The outcome the guard stored on `carrier`, once decided. */
export function storedOutcome(carrier: object): RequestOutcome | undefined {
  const stored = (carrier as Carrier)[STORED];
  return stored instanceof Promise ? undefined : stored;
}

/**
 * The outcome the guard stored on `carrier`, or the promise of it while the guard is still
 * deciding: calls that share a carrier at once (the items of a GraphQL list) wait for the
 * one decision instead of making their own.
 */
export function storedDecision(
  carrier: object,
): RequestOutcome | Promise<RequestOutcome> | undefined {
  return (carrier as Carrier)[STORED];
}

/** Stores the outcome (or its promise) on the carrier itself, so nothing outlives the request. */
export function storeOutcome(
  carrier: object,
  outcome: RequestOutcome | Promise<RequestOutcome>,
): void {
  (carrier as Carrier)[STORED] = outcome;
}

/** Builds outcomes from decisions: headers, refusal bodies, and the logs of refusals. */
export class Outcomes {
  private readonly headerOptions: HeaderOptions | false;
  /** `errorFormat: 'problem'`: refusals carry an RFC 9457 body for HTTP too. */
  private readonly problems: boolean;

  constructor(
    private readonly options: RateLimitModuleOptions,
    private readonly events: RateLimitEvents,
  ) {
    this.headerOptions =
      options.headers === false ? false : options.headers === true ? {} : (options.headers ?? {});
    this.problems = options.errorFormat === 'problem';
  }

  /** The outcome of the store's decision on `enforcing`, in the same order. */
  decided(decision: Decision, enforcing: Entry[], route: string): RequestOutcome {
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
        retryAfter === undefined ? headers : { ...headers, 'Retry-After': String(retryAfter) },
      refusal: {
        status: 429,
        body: tooManyRequestsBody(retryAfter, { message, exposeDetails }),
        ...(this.problems && {
          problem: quotaExceededProblem(
            retryAfter,
            denying.map((e) => e.rule.name),
            { message, exposeDetails },
          ),
        }),
      },
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

  /** The store did not answer: fail-closed policies refuse with 503, the rest admit. */
  failure(enforced: readonly Rule[]): RequestOutcome {
    if (!enforced.some((r) => r.failClosed)) return NO_LIMIT;
    return {
      allowed: false,
      headers: { 'Retry-After': '1' },
      refusal: {
        status: 503,
        body: serviceUnavailableBody(),
        ...(this.problems && { problem: temporaryReducedCapacityProblem() }),
      },
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
      this.events.configError('errorMessage', error);
      return undefined;
    }
  }
}
