import { admitted, denied, type AlgorithmImpl, type Evaluate } from './types.js';

/**
 * Fixed window. State `[count, windowEndMs]`; the window opens at the identity's first
 * admitted request and lasts one period. Admit iff `count + cost <= limit`.
 * In Redis, the count is the value and the window's end the key's expiry (see `decide`).
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
 * The Lua of the fixed window (see `CounterForm` in types.ts), pasted inline as GCRA's is.
 *
 * On the server clock the count is the value and the window's end the key's **expiry**: a
 * decision is `GET` and `PTTL`, then `INCRBY` in a window that goes on, or `PSETEX` for a new
 * one: no `TIME`, no parsing, no string made (what rate-limiter-flexible's fixed window does,
 * without counting refusals). Redis expires no key during a script, so a key `GET` found is
 * there for `PTTL`; a PTTL of 0 or less is no window. A test clock cannot move an expiry, so with one the value holds
 * `"<count>:<windowEndMs>"` instead; so does an override's own state, which expires with the
 * override. 0.1.0 kept every window that way, under the tag `fw`: its windows and these
 * are counted apart (its script would read a count as no window).
 *
 * Reads the consume script's locals `key`, `limit`, `period_ms`, `cost`, `clock`, `now` and
 * `override_until`, and sets `count` and `left_ms` (the state as it stood, read at time 0: the
 * reply; 0 and 0 when no window is open); when it refuses, `denies` (and clears `all_admit`);
 * when it spends, `value` and `ttl_ms`, with `keep_ttl` when the window goes on, or
 * `increments` when `value` is to be added to the count (`INCRBY`).
 */
const decide = `
local count, left_ms = 0, 0
local window_clock = clock or (override_until and now)
local stored = call('GET', key)
if stored then
  if window_clock then
    local colon = string.find(stored, ':', 1, true)
    local window_end = colon and tonumber(string.sub(stored, colon + 1))
    if window_end then count, left_ms = tonumber(string.sub(stored, 1, colon - 1)), window_end - window_clock end
  else
    count, left_ms = tonumber(stored), call('PTTL', key)
  end
  -- A window that has ended is none; one that ends more than two periods from now was not
  -- written at this period (the period was lowered since); a value that is not a count is
  -- not ours.
  if not count or left_ms <= 0 or left_ms > 2 * period_ms then count, left_ms = 0, 0 end
end
if cost > 0 then
  if count + cost > limit then all_admit, denies = false, true
  elseif left_ms == 0 then
    ttl_ms = period_ms
    if window_clock then value = fmt('%d:%d', cost, window_clock + period_ms)
    else value = cost == 1 and '1' or fmt('%d', cost) end
  elseif window_clock then
    ttl_ms, keep_ttl = left_ms, true
    value = fmt('%d:%d', count + cost, window_clock + left_ms)
  else
    ttl_ms, increments, value = left_ms, true, cost == 1 and '1' or fmt('%d', cost)
  end
end`;

/**
 * Gives back in the window the request spent in: the one whose end (its key's expiry, or on a
 * test clock the value's) is the request's `mark`, its end when it spent (the consume script
 * replied it in mode `m`); a window opened since ends elsewhere (see `WINDOW_END_LUA`, which
 * defines `window_end` and, on a Redis without `PEXPIRETIME`, the `slack` of its reading).
 * Reads the refund script's locals `key`, `amount`, `mark`, `clock` and `slack`; sets
 * `refunded`.
 */
const refund = `
local count, at, exact = nil, -1, true
local stored = redis.call('GET', key)
if stored then
  if clock then
    local colon = find(stored, ':', 1, true)
    at = colon and tonumber(sub(stored, colon + 1)) or -1
    count = colon and tonumber(sub(stored, 1, colon - 1))
    -- A window the test clock has left is over, whatever Redis' own clock says of its key.
    if at <= clock then at = -1 end
  else
    count = tonumber(stored)
    at, exact = window_end(key)
  end
end
if count and count > 0 and at > 0 and (at == mark or not exact and math.abs(at - mark) <= slack) then
  refunded = true
  local kept = max(0, count - amount)
  if clock then redis.call('SET', key, fmt('%d:%d', kept, at), 'KEEPTTL')
  else redis.call('DECRBY', key, fmt('%d', count - kept)) end
end`;

export const fixedWindow: AlgorithmImpl = {
  tag: 'fwc',
  evaluate: evaluateFixedWindow,
  lua: { kind: 'counter', decide, refund },
};
