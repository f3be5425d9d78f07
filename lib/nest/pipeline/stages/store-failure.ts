import { RateLimitBackendError } from '../../../core/errors.js';
import type { Route } from '../../plan/rules.js';
import type { Engine } from '../engine.js';
import type { Entry } from './entries.js';
import type { RequestOutcome } from '../outcome.js';

/**
 * The on-store-failure stage: the store did not answer for `enforcing` (an error, a timeout,
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
export function storeFailed(
  engine: Engine,
  route: Route,
  enforcing: readonly Entry[],
  error: unknown,
  failure: () => RequestOutcome,
): RequestOutcome | Promise<RequestOutcome> {
  engine.events.backendError(route.name, error);
  const known = error instanceof RateLimitBackendError ? error.refusal : undefined;
  if (known) {
    const refusing = known.indexes.map((i) => enforcing[i]!);
    return engine.shape.decided(known.decision, refusing, route.name);
  }
  // Concurrency limits have no insurance: a local slot could not be given back.
  const local = enforcing.filter(
    (e) => e.rule.onStoreFailure === 'local' && e.rule.policy?.algorithm !== 'concurrency',
  );
  const fallback = failure();
  if (local.length === 0 || !fallback.allowed) return fallback;
  return engine.insurance
    .decide(local, route.name)
    .then((insured) => engine.shape.decided(insured.decision, insured.local, route.name));
}
