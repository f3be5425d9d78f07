import { gcra } from './gcra.js';
import { admitted, denied, type AlgorithmImpl, type Evaluate } from './types.js';

/**
 * Token bucket. Capacity C = `burst ?? limit`, refilled continuously at `limit / periodMs`
 * tokens per ms; admit iff the refilled tokens >= cost.
 *
 * To keep fractional tokens exact (`3/s`, `7/13s`), tokens are stored multiplied by P
 * (so one ms refills exactly `limit` units and a token is P units): state
 * `[scaledTokens, lastRefillMs]`, stored as `"<scaledTokens>:<lastRefillMs>"`.
 * Changing a policy's period rescales existing buckets: treat it as a reset.
 */
export const evaluateTokenBucket: Evaluate = (
  state,
  now,
  { limit, periodMs: P, capacity, cost },
) => {
  const full = capacity * P;
  // A clock that stepped back (failover to a replica with a lagging clock) takes back what
  // was refilled after `now`, so no interval is ever refilled twice.
  const tokens = state ? Math.max(0, Math.min(full, state[0]! + (now - state[1]!) * limit)) : full;
  const remaining = Math.floor(tokens / P);
  const resetMs = Math.ceil((full - tokens) / limit);
  const need = cost * P;
  // A peek (cost 0) is always admitted and never writes, even over a lowered limit.
  if (cost === 0) return admitted(remaining, resetMs);
  if (need > full) return denied(remaining, resetMs, Infinity);
  if (tokens < need) return denied(remaining, resetMs, Math.ceil((need - tokens) / limit));
  const left = tokens - need;
  const ttlMs = Math.ceil((full - left) / limit);
  return admitted(Math.floor(left / P), ttlMs, [left, now], ttlMs);
};

/**
 * The stores run token bucket as GCRA, in TypeScript and in Lua: the same decisions
 * (property-tested), one state format (a TAT, which Redis keeps as the key's expiry), hence
 * the same reading of a policy that changed. {@link evaluateTokenBucket} stays as the
 * textbook form; the Lua is GCRA's (`gcra.ts`), the same text, so the scripts run both in one
 * branch. Only the key's tag differs.
 */
export const tokenBucket: AlgorithmImpl = {
  tag: 'tb',
  evaluate: gcra.evaluate,
  lua: gcra.lua,
};
