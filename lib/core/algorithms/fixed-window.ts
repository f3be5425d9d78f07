import { admitted, decodeInts, denied, type AlgorithmImpl, type Evaluate } from './types.js';

/**
 * Fixed window. State `[count, windowEndMs]`; the window opens at the identity's first
 * admitted request and lasts one period. Admit iff `count + cost <= limit`.
 * Stored as `"<count>:<windowEndMs>"`.
 */
const evaluateFixedWindow: Evaluate = (state, now, { limit, periodMs, cost }) => {
  // A window that has ended is no window, even if its key has not expired yet; one that
  // ends more than two periods from now was not written at this period (a clock that
  // stepped back by less than a period still finds its window).
  const open = state !== undefined && now < state[1]! && state[1]! <= now + 2 * periodMs;
  const count = open ? state[0]! : 0;
  const end = open ? state[1]! : 0;
  const remaining = Math.max(0, limit - count);
  const resetMs = open ? end - now : 0;
  // A peek (cost 0) is always admitted and never writes, even over a lowered limit.
  if (cost === 0) return admitted(remaining, resetMs);
  if (cost > limit) return denied(remaining, resetMs, Infinity);
  if (count + cost > limit) return denied(remaining, resetMs, end - now);
  const newEnd = open ? end : now + periodMs;
  return admitted(limit - count - cost, newEnd - now, [count + cost, newEnd], newEnd - now);
};

/**
 * The Lua of the fixed window (see `ValueForm` in types.ts); the count and the window's end are
 * compared as `evaluateFixedWindow` compares them.
 */
const decide = `
local function decide(stored, now, limit, period_ms, cost)
  local count, window_end = 0, 0
  if stored then
    local colon = find(stored, ':', 1, true)
    if colon then
      window_end = tonumber(sub(stored, colon + 1))
      if now < window_end and window_end <= now + 2 * period_ms then
        count = tonumber(sub(stored, 1, colon - 1))
      else
        window_end = 0
      end
    end
  end
  if cost == 0 then return true end
  if count + cost > limit then return false end
  if window_end == 0 then
    window_end = now + period_ms
    return true, fmt('%d:%d', count + cost, window_end), period_ms
  end
  -- The window is the stored one: the key already expires at its end (keep_ttl).
  return true, fmt('%d:%d', count + cost, window_end), window_end - now, true
end`;

/** Gives back only in the window the request spent in (`mark`: its end in ms). */
const refund = `
local function refund(stored, mark, cost)
  local colon = stored and find(stored, ':', 1, true)
  if not colon then return nil end
  local count, window_end = tonumber(sub(stored, 1, colon - 1)), tonumber(sub(stored, colon + 1))
  if window_end == mark and count > 0 then return fmt('%d:%d', max(0, count - cost), window_end) end
end`;

export const fixedWindow: AlgorithmImpl = {
  tag: 'fw',
  evaluate: evaluateFixedWindow,
  lua: { kind: 'value', decode: (raw) => decodeInts(raw, 2), decide, refund },
};
