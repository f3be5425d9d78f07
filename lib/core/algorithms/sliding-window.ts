import { admitted, decodeInts, denied, type AlgorithmImpl, type Evaluate } from './types.js';

/**
 * Sliding window (the weighted two-window estimate). Windows are aligned to the epoch:
 * index `i = floor(now / P)`, elapsed `e = now - i·P`. The estimate is
 * `prev · (P - e) / P + cur`; admit iff `estimate + cost <= limit`.
 *
 * State `[i, cur, prev]`: the current window's index and count, and the previous
 * window's count, kept in **one key** (one GET and one SET, rather than a key per window).
 * Stored as `"<i>:<cur>:<prev>"`. To stay exact, the estimate is computed multiplied by P.
 */
const evaluateSlidingWindow: Evaluate = (state, now, { limit, periodMs: P, cost }) => {
  let index = Math.floor(now / P);
  let cur = 0;
  let prev = 0;
  // A window index beyond the next one was not written at this period: not this state.
  if (state !== undefined && state[0]! > index + 1) state = undefined;
  if (state !== undefined && state[0]! > index) {
    // The clock stepped back across a window boundary: stay in the stored window. Elapsed
    // time is then negative, which weighs the previous window a little more than fully:
    // cautious, and every wait below still counts from `now`.
    index = state[0]!;
  }
  const elapsed = now - index * P;
  if (state?.[0] === index) {
    cur = state[1]!;
    prev = state[2]!;
  } else if (state?.[0] === index - 1) {
    prev = state[1]!;
  }
  const quota = limit * P;
  const weighted = prev * (P - elapsed);
  const estimate = weighted + cur * P;
  const remaining = Math.max(0, Math.floor((quota - estimate) / P));
  // The estimate reaches 0 at the end of the window after the last one with a count.
  const resetMs = cur > 0 ? (index + 2) * P - now : prev > 0 ? (index + 1) * P - now : 0;
  // A peek (cost 0) is always admitted and never writes, even over a lowered limit.
  if (cost === 0) return admitted(remaining, resetMs);
  if (cost > limit) return denied(remaining, resetMs, Infinity);
  if (estimate + cost * P > quota) {
    // Either prev's weight decays enough within this window, or we must wait into the next
    // one, where this window's count becomes the decaying `prev`.
    const retryAfterMs =
      cur + cost <= limit
        ? Math.ceil((weighted + (cur + cost - limit) * P) / prev)
        : P - elapsed + Math.ceil(((cur + cost - limit) * P) / cur);
    return denied(remaining, resetMs, retryAfterMs);
  }
  const ttlMs = (index + 2) * P - now;
  return admitted(
    Math.max(0, Math.floor((quota - estimate - cost * P) / P)),
    ttlMs,
    [index, cur + cost, prev],
    ttlMs,
  );
};

const lua = `
local function sliding_window(v, now, L, P, cost)
  local idx = floor(now / P)
  local cur, prev = 0, 0
  if v then
    local a = find(v, ':', 1, true)
    local b = a and find(v, ':', a + 1, true)
    if b then
      local sidx = tonumber(sub(v, 1, a - 1))
      if sidx > idx + 1 then
        -- not written at this period: no state
      elseif sidx > idx then idx = sidx end
      if sidx > idx + 1 then
      elseif sidx == idx then
        cur = tonumber(sub(v, a + 1, b - 1)); prev = tonumber(sub(v, b + 1))
      elseif sidx == idx - 1 then
        prev = tonumber(sub(v, a + 1, b - 1))
      end
    end
  end
  if cost == 0 then return true end
  if cost > L or prev * (P - now + idx * P) + (cur + cost) * P > L * P then return false end
  return true, fmt('%d:%d:%d', idx, cur + cost, prev), (idx + 2) * P - now
end`;

export const slidingWindow: AlgorithmImpl = {
  code: 2,
  tag: 'sw',
  evaluate: evaluateSlidingWindow,
  decode: (raw) => decodeInts(raw, 3),
  lua,
};
