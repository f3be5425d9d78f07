import { RateLimitBackendError } from '../../../core/errors.js';
import type { Route } from '../../plan/rules.js';
import type { StageRun, StepSpec } from '../call.js';
import type { Entry } from '../entry-resolver.js';
import { NO_LIMIT, type RequestOutcome } from '../outcome.js';
import type { StageServices } from '../services.js';

/**
 * The store-failure stage, in place of shape (and of every stage after it) when the
 * enforce stage's store call failed (see {@link storeFailed}). What the route answers without
 * its store is chosen here, once: a fail-closed route's 503 (new each time: a `refuse` of
 * your own may add to its headers), else admission.
 */
export function storeFailureStage(step: StepSpec, services: StageServices): StageRun | undefined {
  const { route } = step;
  if (route.enforced.length === 0) return undefined;
  const failure = route.enforced.some((r) => r.failClosed)
    ? () => services.shape.failure(route.enforced)
    : () => NO_LIMIT;
  return (state, next) =>
    state.failed
      ? storeFailed(services, route, state.entries!.entries, state.error, failure)
      : next(state);
}

/**
 * What the store-failure stage answers when the store did not answer for `enforcing` (an error, a timeout,
 * an open circuit breaker, Redis out of memory or read-only). Logged as
 * `rate_limit.backend_error`; then what this process knows refuses first: a refusal by the
 * store of the same identity and policy whose wait is not over, or whose policy's rate has
 * not given back the cost since (a 429 with its `Retry-After`), whatever the route's failure
 * mode, so a client over its limit is not admitted because the store could not be asked. Then a fail-closed policy wins
 * (`failure`, the route's 503), else the insurance limits of `onStoreFailure: 'local'`
 * policies decide in memory, and the fail-open rest admit.
 *
 * @param failure what the route answers without its store: its 503, or `NO_LIMIT` (a new
 *   503 each time: a `refuse` of your own may add to its headers)
 */
function storeFailed(
  services: StageServices,
  route: Route,
  enforcing: readonly Entry[],
  error: unknown,
  failure: () => RequestOutcome,
): RequestOutcome | Promise<RequestOutcome> {
  services.events.backendError(route.name, error);
  const known = error instanceof RateLimitBackendError ? error.refusal : undefined;
  if (known) {
    const refusing = known.indexes.map((i) => enforcing[i]!);
    return services.shape.decided(known.decision, refusing, route.name);
  }
  // Concurrency limits have no insurance: a local slot could not be given back.
  const local = enforcing.filter(
    (e) => e.rule.onStoreFailure === 'local' && e.rule.policy?.algorithm !== 'concurrency',
  );
  const fallback = failure();
  if (local.length === 0 || !fallback.allowed) return fallback;
  return services.insurance
    .decide(local, route.name)
    .then((insured) => services.shape.decided(insured.decision, insured.local, route.name));
}
