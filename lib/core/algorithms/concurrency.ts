import { randomBytes } from 'node:crypto';
import { admitted, denied, type AlgorithmImpl } from './types.js';
import { quote, RateLimitConfigError } from '../errors.js';
import type { Lease, StoreOutcome, StorePolicy } from '../stores/store.js';

/**
 * Concurrency limits: at most `concurrent` requests of one identity in flight.
 * A request takes a slot when it is admitted and gives it back when it ends; a slot whose
 * holder never gives it back (the process died) expires after its **lease** (`leaseMs`).
 *
 * State per identity, scope and policy name: a set of leases, each an id (random, from
 * `node:crypto`) and its expiry in ms on the store's clock. On Redis, a sorted set
 * (`<prefix>:{<identity>}:<scope>:<name>:cc`, score = expiry), pruned of expired leases by the
 * same script call that takes a slot, and expiring with its longest lease. Both stores:
 * - admitted iff the live leases + 1 <= `concurrent` (a peek, cost 0, takes nothing);
 * - `remaining` = free slots after this request; `resetMs` = until the last live lease
 *   expires (when every slot is free again at the latest; 0 when none is held);
 * - refused: `retryAfterMs` = 1000 (`Retry-After: 1`, as Stripe's concurrent-requests
 *   limiter does: a slot frees whenever a request ends, which no one can predict);
 * - stacked with rate policies all-or-nothing: a request one refuses takes no slot and
 *   spends no rate;
 * - an operator's exemption takes no slot; overrides do not apply to concurrency policies;
 * - a release removes the request's lease ids: giving one back twice frees one slot.
 */

/** Default lease, in **ms**: longer than any request should take. */
const DEFAULT_LEASE_MS = 30_000;

/** The wait, in **ms**, reported when no slot is free. */
const CONCURRENCY_RETRY_MS = 1000;

/** The key tag (last part of the key) of a concurrency policy's leases. */
export const CONCURRENCY_TAG = 'cc';

// Lease lives in stores/store.ts (the store's contract), re-exported here.
export type { Lease } from '../stores/store.js';

/** A fresh lease id: 16 URL-safe characters (96 random bits). */
export function newLeaseId(): string {
  return randomBytes(12).toString('base64url');
}

/**
 * The reference decision, in the shape of the algorithms (see `algorithms/types.ts`):
 * state `[held, lastExpiryMs]` (live leases, and the latest expiry, absolute on the clock
 * `now` is read on), params `limit` = slots, `periodMs` = leaseMs, `cost` 0 or 1.
 */
export const concurrency: AlgorithmImpl = {
  tag: CONCURRENCY_TAG,
  lua: { kind: 'leases' },
  evaluate(state, now, { limit, periodMs, cost }) {
    const held = state?.[0] ?? 0;
    const last = Math.max(now, state?.[1] ?? now);
    if (held + cost > limit) {
      return denied(Math.max(0, limit - held), last - now, CONCURRENCY_RETRY_MS);
    }
    if (cost === 0) return admitted(limit - held, last - now);
    const end = Math.max(last, now + periodMs);
    return admitted(limit - held - cost, end - now, [held + cost, end], periodMs);
  },
};

/**
 * Validates the concurrency form of a policy (`{ concurrent, leaseMs? }`).
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_CONCURRENCY` for a bad `concurrent` or
 *   `leaseMs`, or a rate option beside them (`rate`, `algorithm`, `burst`, `cost`, `block`)
 */
export function concurrencyOf(
  input: {
    concurrent?: unknown;
    leaseMs?: unknown;
    rate?: unknown;
    algorithm?: unknown;
    burst?: unknown;
    cost?: unknown;
    block?: unknown;
    extendBlock?: unknown;
  },
  name: unknown,
  where?: string,
): { limit: number; leaseMs: number } {
  const { concurrent, leaseMs = DEFAULT_LEASE_MS } = input;
  const fail = (message: string) =>
    new RateLimitConfigError(
      'ERR_RATE_LIMIT_CONCURRENCY',
      `${message} in policy ${quote(name)}`,
      where,
    );
  if (typeof concurrent !== 'number' || !Number.isSafeInteger(concurrent) || concurrent < 1) {
    throw fail(`invalid concurrent ${quote(concurrent)}: expected an integer >= 1`);
  }
  if (
    typeof leaseMs !== 'number' ||
    !Number.isSafeInteger(leaseMs) ||
    leaseMs < 1 ||
    leaseMs > 2 ** 40
  ) {
    throw fail(`invalid leaseMs ${quote(leaseMs)}: expected a number of ms from 1 to 2^40`);
  }
  for (const option of ['rate', 'algorithm', 'burst', 'cost', 'block', 'extendBlock'] as const) {
    if (input[option] !== undefined) {
      throw fail(`${option} ${quote(input[option])} does not apply to a concurrency limit`);
    }
  }
  return { limit: concurrent, leaseMs };
}

/** The slots a request took: its policies' leases, when every policy admitted it. */
export function leasesOf(
  policies: readonly StorePolicy[],
  outcomes: readonly StoreOutcome[],
): Lease[] | undefined {
  let leases: Lease[] | undefined;
  policies.forEach((p, i) => {
    const o = outcomes[i]!;
    if (p.lease === undefined || !o.allowed || o.exempt || p.cost === 0) return;
    (leases ??= []).push({ key: p.key, id: p.lease, leaseMs: p.periodMs });
  });
  return leases;
}

/** Whether a concurrency limit refused: a guess of a wait, never worth remembering. */
export function slotRefused(
  policies: readonly StorePolicy[],
  outcomes: readonly StoreOutcome[],
): boolean {
  return policies.some((p, i) => p.algorithm === 'concurrency' && !outcomes[i]!.allowed);
}
