/**
 * When a quota comes back, as far as the client can tell from an answer: the end of a fresh
 * window to the ms when the server states its reset in whole seconds, and, when it states no
 * reset at all for a spent quota, when to probe it again (a back-off that doubles per probe
 * finding it still spent). Times in ms on the client's clock.
 */
import type { RateLimitQuota } from './fields.js';

/**
 * The wait before one request probes a quota reported spent with no reset, ms; doubled after
 * each probe that finds it still spent, up to {@link MAX_PROBE_MS}.
 */
export const PROBE_MS = 1000;
/** The longest wait between probes of a quota that stays spent with no reset, ms. */
const MAX_PROBE_MS = 30_000;

/**
 * The wait before the probe after this answer, ms: back to {@link PROBE_MS} unless the answer
 * showed the quota `spent` with no reset, then twice `probeMs`, at most 30 s and at most
 * `maxWaitMs` (the budget of the request that opened the partition: no probe waits longer),
 * never under {@link PROBE_MS}.
 */
export function nextProbeMs(probeMs: number, spent: boolean, maxWaitMs: number): number {
  return spent ? Math.max(PROBE_MS, Math.min(2 * probeMs, MAX_PROBE_MS, maxWaitMs)) : PROBE_MS;
}

/**
 * The end of the window an answer shows begun, ms on the client's clock, or undefined. A reset
 * in whole seconds may be up to 1 s late (an epoch `X-RateLimit-Reset` is rounded up by the
 * server, and each window of 1 s would then cost 2): when no window is stated and the answer
 * shows a fresh one (all but one left, as the first request after a reset sees), the window
 * began between the send and the answer and is taken to last whole seconds. The end this
 * gives stays within the rounding, so it is never more than 1 s early; a delta reset of a
 * whole-second window gives its own end.
 * @param now when the answer came, ms
 * @param sentAt when its request left, ms
 */
export function freshWindowEnd(q: RateLimitQuota, now: number, sentAt: number): number | undefined {
  if (q.windowSeconds !== undefined || q.limit === undefined || q.remaining !== q.limit - 1) {
    return undefined;
  }
  const windowMs = Math.floor((now + q.resetSeconds * 1000 - sentAt) / 1000) * 1000;
  return windowMs > 0 ? now + windowMs : undefined;
}
