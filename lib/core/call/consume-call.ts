import { leasesOf, slotRefused } from '../algorithms/concurrency.js';
import { signatureOf, type DenyCache } from './deny-cache.js';
import { RateLimitBackendError } from '../errors.js';
import { identityKeyPrefix } from '../model/store-keys.js';
import type { ConsumeOptions, LimitEntry } from '../limiter-types.js';
import { checkCost, checkScope, type Decision, type Policy } from '../model/policy.js';
import type { RecentRefusals } from './refusals.js';
import { abandonLeases, type CallBounds } from '../end/request-end-calls.js';
import { boundedCall } from './store-call.js';
import { decisionOf, storePoliciesOf } from './store-policies.js';
import type { RateLimitStore, StoreOutcome, StorePolicy } from '../stores/store.js';

// How a request is decided (see RateLimiter.consume, consumeEach, spend and peek): apart from
// the limiter, which holds the settings and the operator's calls.

/**
 * Decides `entries` in one bounded store call (none when the deny cache remembers the
 * refusal), and leaves nothing behind: slots taken for a request that is refused or
 * whose call failed are given back, a denial is remembered. When the call fails, the
 * rejection carries the refusal `refusals` still knows of, if any (see
 * `RateLimitBackendError.refusal`).
 *
 * @param peek spend nothing and write nothing (cost 0), and skip the deny cache
 * @param spent called with what the store answered, before the decision is made from it
 * @throws {RateLimitConfigError} for an invalid policy, cost or scope (as a rejection)
 * @throws {RateLimitBackendError} when the store fails, exceeds `timeoutMs`, or the
 *   circuit breaker is open (as a rejection)
 */
export function consumeCall(
  store: RateLimitStore,
  prefix: string,
  bounds: CallBounds,
  denials: DenyCache | undefined,
  refusals: RecentRefusals,
  entries: readonly LimitEntry[],
  options: ConsumeOptions,
  peek: boolean,
  spent?: (policies: readonly StorePolicy[], outcomes: readonly StoreOutcome[]) => void,
): Promise<Decision> {
  const { cost = 1, scope = 'global' } = options;
  const policies: Policy[] = [];
  let storePolicies: StorePolicy[];
  try {
    checkCost(cost, undefined, undefined);
    checkScope(scope);
    storePolicies = storePoliciesOf(
      prefix,
      entries,
      scope,
      cost,
      peek,
      policies,
      spent !== undefined,
    );
  } catch (error) {
    return Promise.reject(error as Error);
  }
  // Shadow policies (`denyCache: false`) and peeks neither use nor feed what is remembered.
  const remembers = !peek && options.denyCache !== false;
  const cache = remembers ? denials : undefined;
  // While the cache remembers no refusal (the usual case), no signature to build per request.
  let signature: string | undefined;
  if (cache !== undefined && cache.size !== 0) {
    signature = signatureOf(storePolicies);
    const remembered = cache.get(signature);
    if (remembered) return Promise.resolve(remembered);
  }
  // No async function here: each would add a promise and a turn of the microtask queue
  // to every request.
  // Whether the call reached the store (not refused by an open breaker): only then can it
  // have taken slots that need giving back.
  let sent = false;
  const consume = () => {
    sent = true;
    return store.consume(storePolicies);
  };
  return boundedCall(
    consume,
    bounds.timeoutMs,
    bounds.breaker,
    bounds.progress,
    // A client still connecting: its connection time is not the call's (see RateLimitStore.ready).
    store,
  ).then(
    (outcomes) => {
      spent?.(storePolicies, outcomes);
      let decision = decisionOf(policies, outcomes);
      const leases = decision.allowed ? leasesOf(storePolicies, outcomes) : undefined;
      if (leases) decision = { ...decision, leases };
      // On Cluster, identities are committed one after the other: a later one's refusal
      // leaves the slots an earlier one took. Given back at once, not after their lease.
      else if (!decision.allowed && entries.some((e) => e.identity !== entries[0]!.identity))
        abandonLeases(store, storePolicies);
      // Refusals are kept; once some are, admissions of their keys reset them.
      if (remembers && (!decision.allowed || refusals.size !== 0))
        refusals.remember(storePolicies, decision);
      if (cache && !decision.allowed && !slotRefused(storePolicies, outcomes)) {
        cache.remember(
          signature ?? signatureOf(storePolicies),
          decision,
          entries.map((e) => identityKeyPrefix(prefix, e.identity)),
        );
      }
      return decision;
    },
    (error: unknown) => {
      // A call that timed out may still run in Redis and take its slots, with no one left
      // to give them back: released now (after it, on the same connection), not after
      // their lease.
      if (sent) abandonLeases(store, storePolicies);
      if (remembers && error instanceof RateLimitBackendError) {
        const known = refusals.refusal(storePolicies);
        if (known) error.refusal = known;
      }
      throw error;
    },
  );
}
