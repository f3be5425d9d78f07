import type { Outcome } from '../algorithms/types.js';
import type { StorePolicy } from '../stores/store.js';

/**
 * Penalties (`block` on a policy): once a request is refused under a policy, the identity
 * is refused under it for `blockMs`. The block lives in a key of its own beside the policy's
 * state, `<policyKey>:b`, whose expiry is the block's end (on a test clock its value holds
 * the end in ms, as the script cannot move an expiry). Both stores follow these rules:
 * - a block in force refuses the policy (so the request, all-or-nothing), spends nothing,
 *   and reports `retryAfterMs` = the block's end;
 * - a refusal during the block leaves it as it is, unless the policy has `extendBlock`;
 * - a refusal by the policy itself (not by a stacked one) starts a block, if the request
 *   spends (cost > 0): a peek never writes; with `blockResets` it deletes the policy's
 *   state, so the first request after the block starts afresh;
 * - an exemption or an override in force for the policy sets its block aside, and a request
 *   that spends under one deletes it (a reset deletes it with the identity's other keys).
 */

/** The key of a policy's block. */
export function blockKeyOf(policyKey: string): string {
  return `${policyKey}:b`;
}

/**
 * An outcome under a block with `leftMs` (**ms**) to run: refused, nothing spent, the wait
 * the longer of the block's and the policy's own. With `resets` (the refusal that starts a
 * `blockResets` block, whose start deletes the policy's state) the wait is the block's
 * alone: once it ends, the policy starts afresh (`{ ttl: 60000, limit: 1, blockDuration:
 * 2000 }` on the throttler: `Retry-After: 2`, not 60).
 */
export function blockedOutcome(outcome: Outcome, leftMs: number, resets = false): Outcome {
  return {
    allowed: false,
    remaining: 0,
    resetMs: Math.max(outcome.resetMs, leftMs),
    retryAfterMs: resets || outcome.allowed ? leftMs : Math.max(leftMs, outcome.retryAfterMs),
  };
}

/**
 * Whether a request's refusal by `policy` itself starts a block: the policy has one, no
 * block was in force (`activeMs`), no exemption or override applied (`controlled`), and the
 * request spends.
 */
export function startsBlock(
  policy: StorePolicy,
  outcome: Outcome,
  activeMs: number | undefined,
  controlled: boolean,
): boolean {
  return (
    policy.blockMs !== undefined &&
    !outcome.allowed &&
    activeMs === undefined &&
    !controlled &&
    policy.cost > 0
  );
}
