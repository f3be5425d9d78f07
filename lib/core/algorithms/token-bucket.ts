import { admitted, decodeInts, denied, type AlgorithmImpl, type Evaluate } from './types.js';

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

const lua = `
local function token_bucket(v, now, L, P, C, cost)
  local full = C * P
  local tokens = full
  if v then
    local i = find(v, ':', 1, true)
    if i then
      local ts = tonumber(sub(v, i + 1))
      tokens = tonumber(sub(v, 1, i - 1))
      tokens = tokens + (now - ts) * L
      if tokens > full then tokens = full elseif tokens < 0 then tokens = 0 end
    end
  end
  local rem, reset = floor(tokens / P), ceil((full - tokens) / L)
  local need = cost * P
  if cost == 0 then return 1, rem, reset, 0 end
  if need > full then return 0, rem, reset, -1 end
  if tokens < need then return 0, rem, reset, ceil((need - tokens) / L) end
  tokens = tokens - need
  reset = ceil((full - tokens) / L)
  return 1, floor(tokens / P), reset, 0, fmt('%d:%d', tokens, now), reset
end`;

export const tokenBucket: AlgorithmImpl = {
  code: 3,
  tag: 'tb',
  evaluate: evaluateTokenBucket,
  encode: (s) => `${s[0]}:${s[1]}`,
  decode: (raw) => decodeInts(raw, 2),
  lua,
};
