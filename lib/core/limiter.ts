import { RateLimitConfigError } from './errors.js';
import { inspectedOf, type InspectedPolicy, type InspectOptions } from './operator/inspect.js';
import { checkPrefix, identityKeyPrefix } from './model/store-keys.js';
import { checkScope, type Decision, type Policy, type PolicyInput } from './model/policy.js';
import { CircuitBreaker, type CircuitState } from './call/circuit-breaker.js';
import type { Lease } from './algorithms/concurrency.js';
import { consumeCall } from './call/consume-call.js';
import { DenyCache } from './call/deny-cache.js';
import { RecentRefusals } from './call/refusals.js';
import { boundedCall, checkTimeoutMs } from './call/store-call.js';
import { checkMaxWaitMs, StoreProgress } from './call/store-progress.js';
import { ReleaseRetries } from './end/release-retries.js';
import { refundCall, releaseCall, spendingOf, type CallBounds } from './end/request-end-calls.js';
import type {
  ConsumeOptions,
  LimitEntry,
  Policies,
  RateLimiterOptions,
  Spending,
} from './limiter-types.js';

export { definePolicy } from './limiter-types.js';
export type {
  ConsumeOptions,
  LimitEntry,
  Policies,
  RateLimiterOptions,
  Spending,
} from './limiter-types.js';
import type { RateLimitStore, StoreOutcome, StorePolicy } from './stores/store.js';

/** How long `reset`, `inspect` and other operator calls may take, in ms: they may have to scan the keyspace. */
const RESET_TIMEOUT_MS = 30_000;

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
   * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_UNSUPPORTED` when the store has no `refund`
   * @throws {RateLimitBackendError} when the store fails or exceeds `timeoutMs`
   */
  refund(spending: Spending, indexes?: readonly number[]): Promise<number> {
    return refundCall(this.store, this.bounds(), spending, indexes);
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
   * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_UNSUPPORTED` when the store has no `release`
   * @throws {RateLimitBackendError} when the store fails or exceeds `timeoutMs` (the leases
   *   are kept for a retry all the same)
   */
  release(leases: readonly Lease[], takenAt: number = Date.now()): Promise<number> {
    return releaseCall(this.store, this.callBounds, leases).catch((error: unknown) => {
      this.retries.keep(leases, takenAt);
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
    const prefix =
      identityKeyPrefix(this.prefix, identity) + (scope === undefined ? '' : `${scope}:`);
    // An operator's call, not a request's: it may scan, so it gets its own generous timeout
    // and stays out of the circuit breaker.
    // Forgotten again once done: a request may have been refused meanwhile.
    return boundedCall(
      () => this.store.deleteByPrefix(prefix),
      RESET_TIMEOUT_MS,
      undefined,
    ).finally(() => this.forgetDenials(identity));
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
  async inspect(identity: string, options: InspectOptions = {}): Promise<InspectedPolicy[]> {
    const { scope } = options;
    if (scope !== undefined) checkScope(scope);
    const store = this.store;
    if (typeof store.inspect !== 'function') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_STORE_UNSUPPORTED',
        'this rate-limit store cannot inspect: implement RateLimitStore.inspect',
        'RateLimiter.inspect',
      );
    }
    const identityPrefix = identityKeyPrefix(this.prefix, identity);
    // The whole identity, even for one scope: its control key (overrides) is read with it.
    const snapshot = await this.operate(() => store.inspect!(identityPrefix));
    return inspectedOf(snapshot, identityPrefix, options);
  }

  /**
   * Runs an operator's store call (inspect, overrides, exemptions): bounded by its own
   * generous timeout (30 s) and kept out of the circuit breaker. Not for requests.
   * @throws {RateLimitBackendError} when the store fails or takes longer
   */
  operate<T>(call: (store: RateLimitStore) => Promise<T>): Promise<T> {
    return boundedCall(() => call(this.store), RESET_TIMEOUT_MS, undefined);
  }

  private bounds(): CallBounds {
    return this.callBounds;
  }

  private run(
    entries: readonly LimitEntry[],
    options: ConsumeOptions,
    peek: boolean,
    spent?: (policies: readonly StorePolicy[], outcomes: readonly StoreOutcome[]) => void,
  ): Promise<Decision> {
    const decided = consumeCall(
      this.store,
      this.prefix,
      this.callBounds,
      this.denials,
      this.refusals,
      entries,
      options,
      peek,
      spent,
    );
    // Only while releases wait for the store: a request answered says it is back.
    if (this.retries.size > 0) decided.then(() => this.retries.storeAnswered(), noop);
    return decided;
  }
}

function noop(): void {}

function entriesOf(identity: string, policies: Policies): LimitEntry[] {
  return (Array.isArray(policies) ? policies : [policies]).map((policy: Policy | PolicyInput) => ({
    identity,
    policy,
  }));
}
