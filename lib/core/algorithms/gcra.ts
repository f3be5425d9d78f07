import { admitted, denied, type AlgorithmImpl, type Evaluate, type State } from './types.js';

/**
 * GCRA, the Generic Cell Rate Algorithm (ITU-T I.371, virtual scheduling form). One
 * theoretical arrival time (TAT) per identity; emission interval T = P / L, tolerance
 * tau = C · T with C = `burst ?? limit`. Admit iff `max(TAT, now) + cost·T - now <= tau`,
 * then `TAT = max(TAT, now) + cost·T`.
 *
 * T is fractional in general (`3/s`: 333.33 ms), so time is counted in ticks of 1/L ms,
 * where T = P ticks and tau = C·P ticks, exactly. TAT is stored as whole milliseconds
 * plus a tick remainder: state `[tatMs, ticks]` with `0 <= ticks < L`, stored as
 * `"<tatMs>"` or `"<tatMs>:<ticks>"`. The debt `TAT - now` in ticks equals
 * `C·P - scaledTokens` of the token bucket, which is why both decide identically.
 */
export const evaluateGcra: Evaluate = (state, now, { limit, periodMs: P, capacity, cost }) => {
  const tau = capacity * P;
  const debt =
    state && state[0]! >= now
      ? Math.min(tau, (state[0]! - now) * limit + Math.min(state[1]!, limit - 1))
      : 0;
  const remaining = Math.floor((tau - debt) / P);
  const resetMs = Math.ceil(debt / limit);
  const need = cost * P;
  // A peek (cost 0) is always admitted and never writes, even over a lowered limit.
  if (cost === 0) return admitted(remaining, resetMs);
  if (need > tau) return denied(remaining, resetMs, Infinity);
  if (debt + need > tau) return denied(remaining, resetMs, Math.ceil((debt + need - tau) / limit));
  const newDebt = debt + need;
  const ttlMs = Math.ceil(newDebt / limit);
  const tat: State = [now + Math.floor(newDebt / limit), newDebt % limit];
  return admitted(Math.floor((tau - newDebt) / P), ttlMs, tat, ttlMs);
};

/**
 * The Lua of GCRA (see `DebtForm` in types.ts), which token bucket runs too: the debt
 * `(TAT - now)·L` in ticks, kept in the key's **expiry** rather than its value. The key
 * expires at the TAT rounded up to the ms, and its value is the credit (ticks, < L) that the
 * rounding added. So on the server clock a decision is `PTTL` then `PEXPIRE`, or `SET ... PX`
 * plus a `GET` of the credit when the emission interval is not a whole number of ms: no
 * `TIME`, no parsing. Redis >= 7 freezes time for the whole script, so both calls see the
 * same `now`. A test clock cannot move an expiry, so with one the value holds
 * `"<expiryMs>:<credit>"` instead; so does an override's own state, which expires with the
 * override.
 *
 * `decide` reads the consume script's locals `key`, `limit`, `period_ms`, `capacity`,
 * `cost`, `clock` (a test clock's ms, or nil), `now` and `override_until` (set under an
 * override), and sets `debt` (as it stood: the reply); when it refuses, `denies` (and clears
 * `all_admit`); when it spends, `value` and `ttl_ms`, or `keep_value` when only the expiry
 * moves.
 */
const decide = `
local debt, tolerance = 0, capacity * period_ms
local debt_clock = clock or (override_until and now)
if debt_clock then
  local stored = call('GET', key)
  local colon = stored and string.find(stored, ':', 1, true)
  local expiry = colon and tonumber(string.sub(stored, 1, colon - 1))
  if expiry and expiry >= debt_clock then
    debt = (expiry - debt_clock) * limit - (tonumber(string.sub(stored, colon + 1)) or 0)
  end
else
  local left_ms = call('PTTL', key)
  if left_ms >= 0 then
    debt = left_ms * limit
    if period_ms % limit == 0 then
      keep_value = true
    else
      -- The credit is a whole number of ticks below the limit; anything else is not ours: 0.
      local credit = tonumber(call('GET', key))
      if credit and credit > 0 and credit < limit and credit == floor(credit) then debt = debt - credit end
    end
  end
end
if debt < 0 then debt = 0 elseif debt > tolerance then debt = tolerance end
local need = cost * period_ms
if debt + need > tolerance then all_admit, denies = false, true
elseif cost > 0 then
  local owed = debt + need
  ttl_ms = ceil(owed / limit)
  value = ttl_ms * limit - owed
  if debt_clock then value = fmt('%d:%d', debt_clock + ttl_ms, value)
  elseif value == 0 then value = '0' else value = fmt('%d', value) end
end`;

/**
 * Shrinks the debt by `amount`, the ticks still owed (see `owedTicks`), deleting the key once
 * nothing is owed. Reads the refund script's locals `key`, `limit`, `amount` and `clock`;
 * sets `refunded`.
 */
const refund = `
local debt = 0
if clock then
  local stored = redis.call('GET', key)
  local colon = stored and string.find(stored, ':', 1, true)
  local expiry = colon and tonumber(string.sub(stored, 1, colon - 1))
  if expiry and expiry >= clock then debt = (expiry - clock) * limit - (tonumber(string.sub(stored, colon + 1)) or 0) end
else
  local left_ms = redis.call('PTTL', key)
  if left_ms >= 0 then
    debt = left_ms * limit
    local credit = tonumber(redis.call('GET', key))
    if credit and credit > 0 and credit < limit and credit == floor(credit) then debt = debt - credit end
  end
end
if debt > 0 then
  refunded = true
  local left = debt - amount
  if left <= 0 then
    redis.call('DEL', key)
  else
    local ttl_ms = ceil(left / limit)
    local value = ttl_ms * limit - left
    if clock then value = fmt('%d:%d', clock + ttl_ms, value) end
    redis.call('SET', key, value, 'PX', ttl_ms)
  end
end`;

export const gcra: AlgorithmImpl = {
  tag: 'gcra',
  evaluate: evaluateGcra,
  lua: { kind: 'debt', decide, refund },
};
