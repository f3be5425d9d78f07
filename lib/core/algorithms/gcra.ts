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

const lua = `
local function gcra(v, now, L, P, C, cost)
  local tau = C * P
  local debt = 0
  if v then
    local ms, ticks
    local i = find(v, ':', 1, true)
    if i then ms = tonumber(sub(v, 1, i - 1)); ticks = tonumber(sub(v, i + 1)) else ms = tonumber(v); ticks = 0 end
    if ms and ms >= now then
      if ticks >= L then ticks = L - 1 end
      debt = (ms - now) * L + ticks
      if debt > tau then debt = tau end
    end
  end
  local rem, reset = floor((tau - debt) / P), ceil(debt / L)
  local need = cost * P
  if cost == 0 then return 1, rem, reset, 0 end
  if need > tau then return 0, rem, reset, -1 end
  if debt + need > tau then return 0, rem, reset, ceil((debt + need - tau) / L) end
  debt = debt + need
  reset = ceil(debt / L)
  local ticks = debt % L
  local tat = now + (debt - ticks) / L
  if ticks == 0 then return 1, floor((tau - debt) / P), reset, 0, fmt('%d', tat), reset end
  return 1, floor((tau - debt) / P), reset, 0, fmt('%d:%d', tat, ticks), reset
end`;

export const gcra: AlgorithmImpl = {
  code: 4,
  tag: 'gcra',
  evaluate: evaluateGcra,
  encode: (s) => (s[1] === 0 ? `${s[0]}` : `${s[0]}:${s[1]}`),
  decode: (raw) => {
    const [ms, ticks = 0, extra] = raw.split(':').map(Number);
    return extra === undefined && Number.isSafeInteger(ms) && Number.isSafeInteger(ticks)
      ? [ms!, ticks]
      : undefined;
  },
  lua,
};
