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

export const gcra: AlgorithmImpl = {
  code: 4,
  tag: 'gcra',
  evaluate: evaluateGcra,
};
