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

const lua = `
local function fixed_window(v, now, L, P, cost)
  local count, wend = 0, 0
  if v then
    local i = find(v, ':', 1, true)
    if i then
      wend = tonumber(sub(v, i + 1))
      if now < wend and wend <= now + 2 * P then count = tonumber(sub(v, 1, i - 1)) else wend = 0 end
    end
  end
  if cost == 0 then return true end
  if count + cost > L then return false end
  if wend == 0 then wend = now + P end
  return true, fmt('%d:%d', count + cost, wend), wend - now
end`;

export const fixedWindow: AlgorithmImpl = {
  code: 1,
  tag: 'fw',
  evaluate: evaluateFixedWindow,
  decode: (raw) => decodeInts(raw, 2),
  lua,
};
