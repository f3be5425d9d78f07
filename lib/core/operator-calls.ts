import { boundedCall } from './call/store-call.js';
import { RateLimitConfigError } from './errors.js';
import { checkScope } from './model/policy.js';
import { identityKeyPrefix, scopeKeyPrefix } from './model/store-keys.js';
import type { RateLimitStore } from './stores/store.js';
import { inspectedOf, type InspectedPolicy, type InspectOptions } from './operator/inspect.js';

/**
 * An operator's store calls (reset, inspect, overrides, exemptions), behind `RateLimiter`'s
 * methods of those names. Not a request's: they may scan, so each gets its own generous
 * timeout, in **ms**, and stays out of the circuit breaker.
 */
const OPERATOR_TIMEOUT_MS = 30_000;

/**
 * Runs `call` on `store`, bounded by {@link OPERATOR_TIMEOUT_MS}, out of the circuit breaker.
 * @throws {RateLimitBackendError} when the store fails or takes longer
 */
export function operate<T>(
  store: RateLimitStore,
  call: (store: RateLimitStore) => Promise<T>,
): Promise<T> {
  return boundedCall(() => call(store), OPERATOR_TIMEOUT_MS, undefined);
}

/**
 * Deletes the keys of `identity` under `scope`, or under every scope.
 * @returns how many keys were deleted
 * @throws {RateLimitBackendError} when the store fails or takes longer
 */
export function deleteIdentityKeys(
  store: RateLimitStore,
  prefix: string,
  identity: string,
  scope: string | undefined,
): Promise<number> {
  const keys =
    scope === undefined
      ? identityKeyPrefix(prefix, identity)
      : scopeKeyPrefix(prefix, identity, scope);
  return operate(store, (s) => s.deleteByPrefix(keys));
}

/**
 * Every stored policy state of `identity`, read at one instant (see `RateLimiter.inspect`).
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_SCOPE` for a bad scope,
 *   `ERR_RATE_LIMIT_STORE_UNSUPPORTED` when the store has no `inspect`
 * @throws {RateLimitBackendError} when the store fails or takes longer
 */
export async function inspectIdentity(
  store: RateLimitStore,
  prefix: string,
  identity: string,
  options: InspectOptions,
): Promise<InspectedPolicy[]> {
  const { scope } = options;
  if (scope !== undefined) checkScope(scope);
  if (typeof store.inspect !== 'function') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_STORE_UNSUPPORTED',
      'this rate-limit store cannot inspect: implement RateLimitStore.inspect',
      'RateLimiter.inspect',
    );
  }
  const identityPrefix = identityKeyPrefix(prefix, identity);
  // The whole identity, even for one scope: its control key (overrides) is read with it.
  const snapshot = await operate(store, (s) => s.inspect!(identityPrefix));
  return inspectedOf(snapshot, identityPrefix, options);
}
