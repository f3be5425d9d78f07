import { admitted, denied, type AlgorithmImpl, type Evaluate, type State } from './types.js';

/**
 * The most entries a sliding log may hold, hence the largest `limit` of a `sliding-log`
 * policy: its state is one timestamp per unit spent in the last period, read and rewritten
 * whole on every request (about 14 bytes each in Redis).
 */
export const MAX_LOG_ENTRIES = 10_000;

/**
 * Sliding log: exact per-hit expiry. Every admitted unit is logged with its time in ms and
 * expires exactly `periodMs` after it; admit iff the units logged in `(now - P, now]`, plus
 * the cost, are `<= limit`. The `@nestjs/throttler` storage counts this way.
 *
 * State: the live timestamps, ascending, one per unit (a cost of 3 logs three), so at most
 * `limit` entries; stored as `"<t1>:<t2>:…"` ('' once a refund emptied it). The request's
 * own hits are logged at `max(now, newest)`: a clock that stepped back never puts a hit
 * before one already logged (cautious: that hit expires a little later than exact).
 *
 * `resetMs` is when the state is back to full (the newest hit expires: the key's TTL);
 * `retryAfterMs` when enough of the oldest hits have expired for the cost.
 */
const evaluateSlidingLog: Evaluate = (state, now, { limit, periodMs: P, cost }) => {
  const log = state === undefined ? [] : state.filter((t) => t > now - P);
  const n = log.length;
  const remaining = Math.max(0, limit - n);
  const newest = n > 0 ? log[n - 1]! : undefined;
  const resetMs = newest === undefined ? 0 : Math.max(0, newest + P - now);
  // A peek (cost 0) is always admitted and never writes, even over a lowered limit.
  if (cost === 0) return admitted(remaining, resetMs);
  if (cost > limit) return denied(remaining, resetMs, Infinity);
  if (n + cost > limit) {
    // The (n + cost - limit)-th oldest hit must expire first.
    return denied(remaining, resetMs, log[n + cost - limit - 1]! + P - now);
  }
  const at = newest !== undefined && newest > now ? newest : now;
  const next: State = log.concat(new Array<number>(cost).fill(at));
  const ttlMs = at + P - now;
  return admitted(limit - n - cost, ttlMs, next, ttlMs);
};

/** The stored log (`"<t1>:<t2>:…"`, or '' for none); undefined when it is no log. */
function decode(raw: string): State | undefined {
  if (raw === '') return [];
  const log = raw.split(':').map(Number);
  return log.every(Number.isSafeInteger) ? log : undefined;
}

/**
 * The state after `cost` is given back to the request that logged its hits at `mark` (ms):
 * up to `cost` entries at `mark` leave the log; undefined when none is there (the hits
 * expired, or were given back already). The reference of the Lua `refund` below.
 */
export function refundSlidingLog(state: State, mark: number, cost: number): State | undefined {
  let left = cost;
  const kept = state.filter((t) => !(t === mark && left > 0 && left-- > 0));
  return left === cost ? undefined : kept;
}

/**
 * The Lua of the sliding log (see `ValueForm` in types.ts): drops the expired entries and
 * compares the count as `evaluateSlidingLog` does. Entries stay strings where they are only
 * copied; `table.concat` writes the numbers of this request, integers below 2^53, in full.
 * A function, for its early returns: its closure costs little beside the log's own work.
 */
const decide = `
local function decide(stored, now, limit, period_ms, cost)
  local log, n = {}, 0
  if stored then
    local since = now - period_ms
    for t in string.gmatch(stored, '%d+') do
      if t + 0 > since then n = n + 1; log[n] = t end
    end
  end
  if cost == 0 then return true end
  if cost > limit or n + cost > limit then return false end
  local at = now
  if n > 0 and log[n] + 0 > now then at = log[n] + 0 end
  local hit = fmt('%d', at)
  for k = 1, cost do log[n + k] = hit end
  return true, table.concat(log, ':'), at + period_ms - now
end
local admits
admits, value, ttl_ms = decide(stored, now, limit, period_ms, cost)
denies = not admits`;

/**
 * Takes up to `cost` entries at `mark` out of the log (see {@link refundSlidingLog}), unless
 * they have expired: the key lives as long as the newest hit, or on a test clock as long as
 * Redis' own clock says, and a hit that no longer counts owes nothing. Reads the refund
 * script's `period_ms` and `now_ms` (see REFUND_SCRIPT).
 */
const refund = `
local function refund(stored, mark, cost)
  if not stored or mark + period_ms <= now_ms() then return nil end
  local log, n, left = {}, 0, cost
  for t in string.gmatch(stored, '%d+') do
    if left > 0 and t + 0 == mark then left = left - 1
    else n = n + 1; log[n] = t end
  end
  if left == cost then return nil end
  return table.concat(log, ':')
end`;

export const slidingLog: AlgorithmImpl = {
  tag: 'sl',
  evaluate: evaluateSlidingLog,
  lua: { kind: 'value', decode, decide, refund },
};
