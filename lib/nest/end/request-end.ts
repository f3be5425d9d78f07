import type { Lease } from '../../core/algorithms/concurrency.js';
import type { RateLimiter, Spending } from '../../core/limiter.js';
import type { RateLimitEvents } from '../observability/events.js';
import type { RequestOutcome } from '../pipeline/outcome.js';
import type { Rule } from '../plan/rules.js';

/**
 * What happens when a request ends: `count` policies get back what the outcome says should
 * not have counted, and concurrency limits get their slots back. The transport (or
 * `RateLimitSettleInterceptor`) says when; a failing store call is logged as
 * `rate_limit.backend_error`: a refund is then lost, a release kept by the limiter and sent
 * again once the store answers.
 */
export class RequestEnds {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly events: RateLimitEvents,
  ) {}

  /**
   * Gives back, once the status is known, what the entries counting the other outcome spent:
   * `count: 'failed'` on success, `'succeeded'` on failure; one store call per identity.
   */
  settler(
    route: string,
    enforcing: readonly { rule: Rule }[],
    spending: Spending,
  ): (status: number) => void {
    // Once: the items of a GraphQL list share one decision, and each item's end reports it.
    let settled = false;
    return (status) => {
      if (settled) return;
      settled = true;
      const indexes: number[] = [];
      enforcing.forEach(({ rule }, i) => {
        const { count, failed } = rule.options;
        if (count === undefined) return;
        let failure: boolean;
        try {
          failure = failed ? failed(status) : status >= 400;
        } catch (error) {
          // A failing function keeps the spending, as if the outcome never came.
          this.events.configError(rule.where, error);
          return;
        }
        if (failure !== (count === 'failed')) indexes.push(i);
      });
      if (indexes.length === 0) return;
      // Called from a response's event: every failure, a store without `refund` included,
      // is a rejection, logged here.
      this.limiter.refund(spending, indexes).catch(this.failed(route));
    };
  }

  /**
   * Gives back the slots a request took under concurrency limits, once (the call's end may be
   * reported more than once). The promise resolves once the store has answered or failed for
   * good (within `timeoutMs`), never rejects: a failure is logged, and the limiter keeps the
   * leases and sends them again once the store answers.
   */
  releaser(route: string, leases: readonly Lease[]): () => Promise<void> {
    const takenAt = Date.now();
    let released: Promise<void> | undefined;
    return () => {
      if (released) return released;
      // A store without `release` (refused at bootstrap) rejects like a failing one.
      released = this.limiter.release(leases, takenAt).then(noop, this.failed(route));
      return released;
    };
  }

  /** `outcome` with `release` called too when it ends. */
  withRelease(outcome: RequestOutcome, release: () => Promise<void>): RequestOutcome {
    const first = outcome.release;
    if (!first) return { ...outcome, release };
    return {
      ...outcome,
      release: () => Promise.all([first(), release()]).then(noop),
    };
  }

  private failed(route: string): (error: unknown) => void {
    return (error) => this.events.backendError(route, error);
  }
}

function noop(): void {}
