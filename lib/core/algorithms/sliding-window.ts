import { admitted, denied, type AlgorithmImpl, type Evaluate, type State } from './types.js';

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

/**
 * The Lua of the sliding window (see `ValueForm` in types.ts), pasted inline (a closure per
 * call would cost every request); the estimate, multiplied by the period, is compared as
 * `evaluateSlidingWindow` compares it. Also sets `index`, `cur` and `prev`: the window `now`
 * falls in (or the stored one, when the clock stepped back) and the two counts as they stood
 * in it, which the lone path replies (see `lua/lone.ts`).
 */
const decide = `
local index = floor(now / period_ms)
local cur, prev, same = 0, 0, false
if stored then
  -- One match for the three numbers: 7% of a decision's instructions less than finding
  -- the colons and cutting between them.
  local si, sc, sp = string.match(stored, '^(%d+):(%d+):(%d+)$')
  if si then
    local stored_index = si + 0
    -- An index beyond the next window's was not written at this period: no state.
    if stored_index <= index + 1 then
      -- The clock stepped back across a window boundary: stay in the stored window.
      if stored_index > index then index = stored_index end
      if stored_index == index then
        same = true
        cur, prev = sc + 0, sp + 0
      elseif stored_index == index - 1 then
        prev = sc + 0
      end
    end
  end
end
if cost > 0 then
  if cost > limit or prev * (period_ms - now + index * period_ms) + (cur + cost) * period_ms > limit * period_ms then
    denies = true
  else
    -- In the stored window the key already expires at (index + 2) * period_ms (keep_ttl).
    value, ttl_ms, keep_ttl = fmt('%d:%d:%d', index, cur + cost, prev), (index + 2) * period_ms - now, same
  end
end`;

/**
 * Gives back to the window the request spent in (`mark`: its index), as the current window
 * or, once the next one has begun, as the previous one; two windows on, when it no longer
 * counts, nothing (its value may outlive it: a later spending keeps it as the previous window,
 * and a test clock cannot expire the key). Reads the refund script's `period_ms` and `now_ms`
 * (see REFUND_SCRIPT).
 */
const refund = `
local function refund(stored, mark, cost)
  if not stored then return nil end
  -- Read as the consume script reads it: a value it takes for no state owes nothing.
  local si, sc, sp = string.match(stored, '^(%d+):(%d+):(%d+)$')
  if not si then return nil end
  local index = si + 0
  if index ~= mark and index ~= mark + 1 then return nil end
  -- Read rather than left to the key's expiry, which Redis keeps for the ms it falls on.
  if now_ms() >= (mark + 2) * period_ms then return nil end
  local cur, prev = sc + 0, sp + 0
  if index == mark and cur > 0 then return fmt('%d:%d:%d', index, max(0, cur - cost), prev) end
  if index == mark + 1 and prev > 0 then return fmt('%d:%d:%d', index, cur, max(0, prev - cost)) end
end`;

/**
 * The stored `"<index>:<cur>:<prev>"` as the Lua reads it (`%d+` each, then a number), or
 * undefined: a value the script takes for no state (`" 5"`, `"1e1"`, `"-4"`) is none here
 * either, and a count past 2^53 - 1, which no limit reaches, is read as 2^53 - 1, so that it
 * refuses as in the script and every wait stays a finite number.
 */
function decode(raw: string): State | undefined {
  const match = STORED.exec(raw);
  return match
    ? match.slice(1).map((d) => Math.min(Number(d), Number.MAX_SAFE_INTEGER))
    : undefined;
}

const STORED = /^(\d+):(\d+):(\d+)$/;

export const slidingWindow: AlgorithmImpl = {
  tag: 'sw',
  evaluate: evaluateSlidingWindow,
  lua: { kind: 'value', decode, decide, refund },
};
