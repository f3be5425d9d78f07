import { performance } from 'node:perf_hooks';
import { RateLimitBackendError } from '../../../core/errors.js';
import type { Lease } from '../../../core/algorithms/concurrency.js';
import type { RateLimiter } from '../../../core/limiter.js';
import { hashIdentity, type RateLimitEvents } from '../../observability/events.js';
import type { Trace } from '../../observability/observer.js';
import type { StageRun, StepSpec } from '../call.js';
import type { Entry } from '../entry-resolver.js';
import type { StageServices } from '../services.js';

/**
 * The shadow stage, once the enforced policies admitted: shadow policies count only what
 * those let through, in a call of their own, so a would-be denial never blocks the request.
 * Their slots are held like enforced ones, so the would-be refusals are real ones. Only on a
 * step with shadow policies.
 */
export function shadowStage(step: StepSpec, services: StageServices): StageRun | undefined {
  const { route } = step;
  if (route.shadowed.length === 0) return undefined;
  const { entries: resolver, limiter, events, ends } = services;
  return (state, next) => {
    if (!state.outcome.allowed) return next(state);
    return resolver
      .entriesOf(state.ctx, route, route.shadowed, state.identities)
      .then(({ entries }) => countShadow(limiter, events, entries, route.name, state.trace))
      .then((leases) => {
        if (leases)
          state.outcome = ends.withRelease(state.outcome, ends.releaser(route.name, leases));
        return next(state);
      });
  };
}

/**
 * Counts shadow policies in a call of their own and logs would-be denials as
 * `rate_limit.shadow_blocked` (throttled per route and identity); never refuses, never throws (a store failure is logged as
 * `rate_limit.backend_error`, with `shadow: true`).
 * @returns the slots shadow concurrency limits took, to give back when the request ends
 */
async function countShadow(
  limiter: RateLimiter,
  events: RateLimitEvents,
  shadowed: Entry[],
  route: string,
  trace: Trace | undefined,
): Promise<readonly Lease[] | undefined> {
  if (shadowed.length === 0) return undefined;
  const entries = shadowed.map((e) => e.entry);
  if (trace) trace.shadowEntries = entries;
  const started = trace ? performance.now() : 0;
  try {
    // Every would-be denial is counted, never answered from the deny cache.
    const decision = await limiter.consumeEach(entries, { denyCache: false });
    if (trace) {
      trace.shadowMs = performance.now() - started;
      trace.shadowDecision = decision;
    }
    decision.policies.forEach((p, i) => {
      if (p.allowed) return;
      const { entry } = shadowed[i]!;
      events.shadowBlocked(route, entry.identity, () => ({
        route,
        policy: p.name,
        identity: hashIdentity(entry.identity),
        cost: entry.cost,
        retryAfterMs: p.retryAfterMs,
      }));
    });
    return decision.leases;
  } catch (error) {
    const kind = error instanceof RateLimitBackendError ? error.kind : 'error';
    if (trace) {
      trace.shadowMs = performance.now() - started;
      trace.shadowError = kind;
    }
    events.backendError(route, error, { shadow: true });
    return undefined;
  }
}
