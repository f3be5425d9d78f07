import { RateLimitBackendError, RateLimitConfigError } from './errors.js';
import type { InspectedPolicy, InspectOptions } from './operator/inspect.js';
import { deleteIdentityKeys, inspectIdentity, operate } from './operator-calls.js';
import { checkPrefix, identityKeyPrefix } from './model/store-keys.js';
import {
  checkCost,
  checkScope,
  resolvePolicy,
  type Decision,
  type LimitEntry,
  type Policy,
  type PolicyInput,
} from './model/policy.js';
import type { Spending } from './model/refund.js';
import {
  CircuitBreaker,
  type CircuitBreakerOptions,
  type CircuitState,
} from './call/circuit-breaker.js';
import { leasesOf, slotRefused, type Lease } from './algorithms/concurrency.js';
import { DenyCache, signatureOf, type DenyCacheOptions } from './call/deny-cache.js';
import { RecentRefusals } from './call/refusals.js';
import { boundedCall, checkTimeoutMs } from './call/store-call.js';
import { decisionOf, storePoliciesOf } from './call/store-policies.js';
import { checkMaxWaitMs, StoreProgress } from './call/store-progress.js';
import { ReleaseRetries } from './end/release-retries.js';
import {
  abandonLeases,
  refundCall,
  releaseCall,
  spendingOf,
  type CallBounds,
} from './end/request-end-calls.js';
import type { RateLimitStore, StoreOutcome, StorePolicy } from './stores/store.js';

// The engine's shapes, named where its callers look for them.
export type { LimitEntry } from './model/policy.js';
export type { Spending } from './model/refund.js';

/** Options of `RateLimiter`. */
export interface RateLimiterOptions {
  store: RateLimitStore;
  /** First part of every key: `<prefix>:{<identity>}:<scope>:<policy>:…`. Default `'rl'`. */
  prefix?: string;
  /**
   * Longest wait for one store call while the store answers nothing, in **ms** (default 100).
   * Past it the call fails with a {@link RateLimitBackendError} of kind `timeout`; the call
   * is not retried, and its late reply is ignored. A store that answered other calls
   * meanwhile is behind, not down, as is one whose call this process itself held up (its
   * timer ran late: a busy event loop): the call keeps waiting, up to `maxWaitMs`, and such a
   * timeout never opens the circuit breaker. `Infinity` waits forever.
   */
  timeoutMs?: number;
  /**
   * Longest wait, in **ms**, for a store call while the store is behind (see `timeoutMs`):
   * checked every `timeoutMs`, so a call gives up at the first check past it. At least
   * `timeoutMs`; `Infinity` waits as long as the store keeps answering. Default 10 × `timeoutMs`.
   */
  maxWaitMs?: number;
  /**
   * Stops calling a store that keeps failing, for a cool-down, then probes it with one
   * call. Default `{ failureThreshold: 5, cooldownMs: 2000 }`; `false` turns it off.
   */
  circuitBreaker?: CircuitBreakerOptions | false;
  /**
   * Answers a request that was just refused for a long wait from memory, without the store,
   * until its wait is over (see {@link DenyCacheOptions}). Off by default; `true` takes the
   * defaults. Calls with `denyCache: false` (shadow policies) always reach the store.
   */
  denyCache?: DenyCacheOptions | boolean;
}

/** Options of one `RateLimiter.consume` call. */
export interface ConsumeOptions {
  /** Units to spend under every policy that sets no `cost` of its own: an integer >= 0. Default 1. */
  cost?: number;
  /** Scope for policies that name none: one scope, one budget per identity. Default `'global'`. */
  scope?: string;
  /** `false` to ask the store even when the deny cache knows the answer (shadow policies). */
  denyCache?: boolean;
}

/** Policies as `consume` takes them: validated {@link Policy} objects or inputs to validate. */
export type Policies = Policy | PolicyInput | readonly (Policy | PolicyInput)[];

/**
 * Validates a policy once, for use on every request (see {@link resolvePolicy}).
 * @throws {RateLimitConfigError}
 */
export function definePolicy(input: PolicyInput, where?: string): Policy {
  return resolvePolicy(input, where);
}

/**
 * The engine, usable without Nest: identity + policies -> one atomic store call -> a
 * {@link Decision}.
 *
 * ```ts
 * const limiter = new RateLimiter({ store: new RedisStore({ client: new Redis() }) });
 * const decision = await limiter.consume('user:42', [
 *   { name: 'burst', rate: '10/s' },
 *   { name: 'daily', rate: '10000/d' },
 * ]);
 * ```
 */
export class RateLimiter {
  readonly store: RateLimitStore;
  readonly prefix: string;
  readonly timeoutMs: number;
  private readonly breaker: CircuitBreaker | undefined;
  private readonly denials: DenyCache | undefined;
  /** What the store refused, for when it cannot answer (see `RateLimitBackendError.refusal`). */
  private readonly refusals = new RecentRefusals();
  private readonly callBounds: CallBounds;
  private readonly retries: ReleaseRetries;

  /** @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION` for a bad `prefix`, `timeoutMs`, `maxWaitMs` or `circuitBreaker` */
  constructor(options: RateLimiterOptions) {
    const { store, prefix = 'rl', timeoutMs = 100, circuitBreaker = {}, denyCache } = options;
    if (!store || typeof store.consume !== 'function') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OPTION',
        'RateLimiter needs a store',
        'RateLimiter',
      );
    }
    checkPrefix(prefix, 'RateLimiter');
    checkTimeoutMs(timeoutMs, 'RateLimiter');
    const maxWaitMs = checkMaxWaitMs(options.maxWaitMs ?? 10 * timeoutMs, timeoutMs, 'RateLimiter');
    this.store = store;
    this.prefix = prefix;
    this.timeoutMs = timeoutMs;
    this.breaker = circuitBreaker === false ? undefined : new CircuitBreaker(circuitBreaker);
    this.callBounds = { timeoutMs, breaker: this.breaker, progress: new StoreProgress(maxWaitMs) };
    this.denials =
      denyCache === undefined || denyCache === false
        ? undefined
        : new DenyCache(denyCache === true ? {} : denyCache);
    this.retries = new ReleaseRetries((leases) => releaseCall(store, this.callBounds, leases));
    store.watchControls?.(prefix, (identities) => identities.forEach((p) => this.forgetPrefix(p)));
  }

  /**
   * Forgets the denials the deny cache holds for `identity`, and the refusals remembered for
   * when the store fails (done by `reset`, and by the module's service on every override or
   * exemption change).
   */
  forgetDenials(identity: string): void {
    this.forgetPrefix(identityKeyPrefix(this.prefix, identity));
  }

  private forgetPrefix(identityPrefix: string): void {
    this.denials?.invalidate(identityPrefix);
    this.refusals.forget(identityPrefix);
  }

  /** The circuit breaker's state; `closed` when it is turned off. */
  get circuitState(): CircuitState {
    return this.breaker?.state ?? 'closed';
  }

  /**
   * Spends `cost` under every policy, all-or-nothing, in one store call.
   *
   * @param identity who is limited, e.g. `user:42` or `ip:203.0.113.7` (hashed into the
   *   key when longer than 64 characters or not plain printable ASCII)
   * @throws {RateLimitConfigError} for an invalid policy, cost or scope, or two policies
   *   with the same scope and name
   * @throws {RateLimitBackendError} when the store fails, exceeds `timeoutMs`, or the
   *   circuit breaker is open
   */
  consume(identity: string, policies: Policies, options: ConsumeOptions = {}): Promise<Decision> {
    return this.consumeEach(entriesOf(identity, policies), options);
  }

  /**
   * Like {@link RateLimiter.consume}, with an identity per policy. Policies of one
   * identity are decided all-or-nothing in one store call; on Redis Cluster, policies of
   * different identities live in different slots and are decided one identity after the
   * other (a denial by a later identity does not refund an earlier one).
   * @throws like {@link RateLimiter.consume}
   */
  consumeEach(entries: readonly LimitEntry[], options: ConsumeOptions = {}): Promise<Decision> {
    return this.run(entries, options, false);
  }

  /**
   * Like {@link RateLimiter.consumeEach}, and returns what the request spent, to give back
   * with {@link RateLimiter.refund} once its outcome is known (`count: 'failed'`).
   * `spending` is undefined when nothing was spent (denied, exempt, cost 0, overridden).
   * @throws like {@link RateLimiter.consume}
   */
  async spend(
    entries: readonly LimitEntry[],
    options: ConsumeOptions = {},
  ): Promise<{ decision: Decision; spending?: Spending }> {
    let spending: Spending | undefined;
    const decision = await this.run(entries, options, false, (policies, outcomes) => {
      spending = spendingOf(policies, outcomes);
    });
    return spending ? { decision, spending } : { decision };
  }

  /**
   * Gives back what a request spent (see {@link RateLimiter.spend}) under the entries at
   * `indexes` (default: all), atomically, one store call per identity: never more than it
   * spent, never below empty, nothing for a window that has passed.
   * @returns how many policies got something back
   * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_UNSUPPORTED` when the store has no
   *   `refund` (as a rejection, like every error of the limiter's calls: none throws)
   * @throws {RateLimitBackendError} when the store fails or exceeds `timeoutMs`
   */
  refund(spending: Spending, indexes?: readonly number[]): Promise<number> {
    return refundCall(this.store, this.callBounds, spending, indexes);
  }

  /**
   * Gives back the slots a request took under concurrency limits ({@link Decision.leases}),
   * in one store call per identity. Idempotent: a lease given back twice frees one slot.
   * Never goes through the circuit breaker (an open breaker would hold the slots until their
   * lease). When the store fails, the leases are kept and sent again until it answers (every
   * second, and as soon as a request's store call succeeds), until they would have expired.
   *
   * @param takenAt when the leases were taken, in ms on `Date.now()` (default: now): a kept
   *   lease is dropped `leaseMs` after it
   * @returns how many slots were freed
   * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_UNSUPPORTED` when the store has no
   *   `release` (as a rejection, like every error of the limiter's calls: none throws)
   * @throws {RateLimitBackendError} when the store fails or exceeds `timeoutMs` (the leases
   *   are kept for a retry all the same)
   */
  release(leases: readonly Lease[], takenAt: number = Date.now()): Promise<number> {
    return releaseCall(this.store, this.callBounds, leases).catch((error: unknown) => {
      // A store that cannot release never will: nothing to send again.
      if (!(error instanceof RateLimitConfigError)) this.retries.keep(leases, takenAt);
      throw error;
    });
  }

  /** How many released leases wait for the store to answer again (see {@link RateLimiter.release}). */
  get releasesKept(): number {
    return this.retries.size;
  }

  /**
   * Stops retrying the releases kept while the store failed, and forgets them (their leases
   * expire on the store's clock). For shutdown, before the store is closed.
   */
  close(): void {
    this.retries.close();
  }

  /**
   * Reads every policy's state for `identity`, spending nothing and writing nothing
   * (a consume at cost 0).
   * @throws like {@link RateLimiter.consume}
   */
  peek(
    identity: string,
    policies: Policies,
    options: Omit<ConsumeOptions, 'cost'> = {},
  ): Promise<Decision> {
    return this.run(entriesOf(identity, policies), options, true);
  }

  /**
   * Forgets what `identity` has spent: under `scope` only, or under every scope.
   * @returns how many keys were deleted
   * @throws {RateLimitBackendError} when the store fails
   */
  async reset(identity: string, scope?: string): Promise<number> {
    if (scope !== undefined) checkScope(scope);
    this.forgetDenials(identity);
    // Forgotten again once done: a request may have been refused meanwhile.
    return deleteIdentityKeys(this.store, this.prefix, identity, scope).finally(() =>
      this.forgetDenials(identity),
    );
  }

  /**
   * Every stored policy state of `identity` (under `scope` only, or every scope), read at
   * one instant: one entry per key, with `limit` and `remaining` for the policies whose
   * rate is known (`options.known`, `options.policies`, or an override in force).
   *
   * On Redis the keys are found like {@link RateLimiter.reset} finds them (SCAN on a
   * standalone server; on Cluster only the identity's slot), then read in one script call.
   * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_UNSUPPORTED` when the store has no `inspect`
   * @throws {RateLimitBackendError} when the store fails or takes more than 30 s
   */
  inspect(identity: string, options: InspectOptions = {}): Promise<InspectedPolicy[]> {
    return inspectIdentity(this.store, this.prefix, identity, options);
  }

  /**
   * Runs an operator's store call (inspect, overrides, exemptions): bounded by its own
   * generous timeout (30 s) and kept out of the circuit breaker. Not for requests.
   * @throws {RateLimitBackendError} when the store fails or takes longer
   */
  operate<T>(call: (store: RateLimitStore) => Promise<T>): Promise<T> {
    return operate(this.store, call);
  }

  /** {@link RateLimiter.decide}, then tells the kept releases when the store answered. */
  private run(
    entries: readonly LimitEntry[],
    options: ConsumeOptions,
    peek: boolean,
    spent?: (policies: readonly StorePolicy[], outcomes: readonly StoreOutcome[]) => void,
  ): Promise<Decision> {
    const decided = this.decide(entries, options, peek, spent);
    // Only while releases wait for the store: a request answered says it is back.
    if (this.retries.size > 0) decided.then(() => this.retries.storeAnswered(), noop);
    return decided;
  }

  /**
   * Decides `entries` in one bounded store call (none when the deny cache remembers the
   * refusal), and leaves nothing behind: slots taken for a request that is refused or
   * whose call failed are given back, a denial is remembered. When the call fails, the
   * rejection carries the refusal still known of, if any (see `RateLimitBackendError.refusal`).
   *
   * @param peek spend nothing and write nothing (cost 0), and skip the deny cache
   * @param spent called with what the store answered, before the decision is made from it
   * @throws {RateLimitConfigError} for an invalid policy, cost or scope (as a rejection)
   * @throws {RateLimitBackendError} when the store fails, exceeds `timeoutMs`, or the
   *   circuit breaker is open (as a rejection)
   */
  private decide(
    entries: readonly LimitEntry[],
    options: ConsumeOptions,
    peek: boolean,
    spent:
      ((policies: readonly StorePolicy[], outcomes: readonly StoreOutcome[]) => void) | undefined,
  ): Promise<Decision> {
    const { store, prefix, refusals } = this;
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
    const cache = remembers ? this.denials : undefined;
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
      this.callBounds.timeoutMs,
      this.callBounds.breaker,
      this.callBounds.progress,
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
}

function noop(): void {}

function entriesOf(identity: string, policies: Policies): LimitEntry[] {
  return (Array.isArray(policies) ? policies : [policies]).map((policy: Policy | PolicyInput) => ({
    identity,
    policy,
  }));
}
