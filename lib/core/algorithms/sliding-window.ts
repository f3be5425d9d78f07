import { admitted, denied, type AlgorithmImpl, type Evaluate, type State } from './types.js';

/**
 * Sliding window (the weighted two-window estimate). Windows are aligned to the epoch:
 * index `i = floor(now / P)`, elapsed `e = now - i·P`. The estimate is
 * `prev · (P - e) / P + cur`; admit iff `estimate + cost <= limit`.
 *
 * State `[i, cur, prev]`: the current window's index and count, and the previous
 * window's count, kept in **one key** (one GET and one SET, rather than a key per window).
 * Stored as `"<i>:<cur>:<prev>"`, or on Redis's server clock packed in an integer with the
 * window in the key's expiry ({@link PACKED_BASE}). To stay exact, the estimate is computed
 * multiplied by P.
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
 * The packed form, which RedisStore keeps on its server clock while the limit is below
 * {@link PACKED_BASE} and the period at least {@link PACKED_MIN_PERIOD_MS}: the value is the
 * integer `((index mod 90) · 10^7 + prev) · 10^7 + cur` (below 2^53), and the key expires at
 * the end of the window after the current one, `(index + 2) · P`, as the string form's TTL.
 * So a request within the stored window reads the window from the key's expiry rather than
 * the clock: `GET`, `PTTL` and an `INCRBY` of its cost, which keeps the expiry (the lone path,
 * `stores/redis/lua/lone.ts`; 25% fewer instructions in Redis than `TIME`, `GET` and a `SET`
 * of the string). Past its window, where the clock is read, the expiry gives the window to
 * within half a period, which the index's last digits confirm: an expiry moved by a few ms
 * (a slow script before Redis 7.2, whose `TIME` and `PTTL` are read at different ms; a key
 * migrated between Cluster nodes; a failover) still finds its window, and one set at
 * another period (the policy's period was changed) is no state, 89 times in 90. On a test
 * clock, under an override, or past those bounds the state is the string
 * `"<index>:<cur>:<prev>"`. Both forms are kept under the tag `swc` (earlier versions kept
 * only the string, under `sw`, which they could not tell from a count).
 */
export const PACKED_BASE = 10_000_000;
export const PACKED_MIN_PERIOD_MS = 1000;
/** How many windows the packed value's index digits tell apart (see {@link PACKED_BASE}). */
export const PACKED_INDEX_MOD = 90;
/** The least value that is not a packed one: 90 · 10^14, below 2^53. */
export const PACKED_END = PACKED_INDEX_MOD * PACKED_BASE * PACKED_BASE;

/**
 * Lua: the two counts of the packed value `n` (below {@link PACKED_END}), assigned to the
 * caller's locals named `cur` and `prev`; exact, every term an integer below 2^53.
 */
export const packedCountsLua = (cur: string, prev: string) =>
  `${cur} = n % ${PACKED_BASE}\n${prev} = ((n - ${cur}) / ${PACKED_BASE}) % ${PACKED_BASE}`;

/**
 * Lua: the packed value `digits` of `key` as the state it stands for, in `si`, `sc` and `sp`
 * (index, cur, prev), with `now_value` the time in ms; sets `left` (the key's `PTTL`) and
 * `in_window`. Within its window (more than a period left, at most two) the value is read as
 * its expiry says, as the lone path reads it without the clock; otherwise its window is the
 * one whose end is nearest the expiry, if the value's index digits are that window's. The
 * rest (no expiry, not a packed value, an expiry set at another period) leaves `si` nil: no
 * state.
 */
const unpack = (nowValue: string) => `
local n, left = digits + 0, redis.call('PTTL', key)
local at_index = floor((${nowValue} + left) / period_ms + 0.5) - 2
local in_window = left > period_ms and left <= 2 * period_ms
if left > 0 and n < ${PACKED_END} then
  ${packedCountsLua('sc', 'sp').replace(/\n/g, '\n  ')}
  local digits_of_index = (n - sc - sp * ${PACKED_BASE}) / ${PACKED_BASE * PACKED_BASE}
  if in_window or digits_of_index == at_index % ${PACKED_INDEX_MOD} then si = at_index end
end`;

/** Lua: the packed value of the state `index`, `prev`, `count` (see {@link PACKED_BASE}). */
const packedOf = (count: string) =>
  `fmt('%d', ((index % ${PACKED_INDEX_MOD}) * ${PACKED_BASE} + prev) * ${PACKED_BASE} + ${count})`;

/**
 * The Lua of the sliding window (see `ValueForm` in types.ts), pasted inline (a closure per
 * call would cost every request); the estimate, multiplied by the period, is compared as
 * `evaluateSlidingWindow` compares it. Reads the value in either form (see
 * {@link PACKED_BASE}); a packed value is replaced in `stored` by the string it stands for,
 * and within its window it is read at `at`, the time its expiry tells (`now` within the 2 ms
 * of its writing, whatever after a change of the period): the script replies both. On the
 * server clock without an override, the new value is packed where the stored one was, and
 * always where `prefer_packed` is set: by the lone path, which reads that form cheaper; the
 * general loop, which would pay a `PTTL` more, keeps the string for a state of its own. Also
 * sets `index`, `cur` and `prev`: the window `at` falls in (or the stored one, when the clock
 * stepped back) and the two counts as they stood in it, which the lone path replies (see
 * `lua/lone.ts`). Reads the consume script's `clock`, `override_until` and `prefer_packed`
 * besides `ValueForm`'s locals (`at` among them).
 */
const decide = `
local cur, prev, same = 0, 0, false
local packable = not clock and not override_until and limit < ${PACKED_BASE} and period_ms >= ${PACKED_MIN_PERIOD_MS}
local packs, read_packed, addable = packable and prefer_packed, false, false
-- One match for the three numbers: 7% of a decision's instructions less than finding the
-- colons and cutting between them.
local si, sc, sp
if stored then si, sc, sp = string.match(stored, '^(%d+):(%d+):(%d+)$') end
if stored and not si then
  local digits = string.match(stored, '^%d+$')
  if digits then
    -- INCRBY refuses a leading zero ('05'): such a value is rewritten.
    packs, read_packed, addable = packable, true, string.byte(digits) ~= 48
    ${unpack('now').trim().replace(/\n/g, '\n    ')}
    if si and in_window then at = (si + 2) * period_ms - left end
  end
  -- What the script replies: the state the packed value stands for, or none.
  stored = si and fmt('%d:%d:%d', si, sc, sp) or false
end
local index = floor(at / period_ms)
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
if cost > 0 then
  if cost > limit or prev * (period_ms - at + index * period_ms) + (cur + cost) * period_ms > limit * period_ms then
    denies = true
  else
    -- In the stored window the key already expires at (index + 2) * period_ms (keep_ttl), but
    -- for a value taking the packed form, whose window is that expiry: it is set anew.
    ttl_ms, keep_ttl = (index + 2) * period_ms - at, same and packs == read_packed
    if same and packs and addable then
      -- The cost added, as the lone path adds it: the index digits stay what they were (in
      -- its window a value is read whatever they say), so both paths leave the same value.
      increments, value = true, fmt('%d', cost)
    -- A previous count past the base (a limit lowered to below it) keeps the string.
    elseif packs and prev < ${PACKED_BASE} then value = ${packedOf('cur + cost')}
    else value = fmt('%d:%d:%d', index, cur + cost, prev) end
  end
end`;

/**
 * Gives back to the window the request spent in (`mark`: its index), as the current window
 * or, once the next one has begun, as the previous one; two windows on, when it no longer
 * counts, nothing (its value may outlive it: a later spending keeps it as the previous window,
 * and a test clock cannot expire the key). A packed value (see {@link PACKED_BASE}) stays
 * packed. Reads the refund script's `key`, `period_ms` and `now_ms` (see REFUND_SCRIPT).
 */
const refund = `
local function refund(stored, mark, cost)
  if not stored then return nil end
  -- Read as the consume script reads it: a value it takes for no state owes nothing.
  local si, sc, sp = string.match(stored, '^(%d+):(%d+):(%d+)$')
  local packed = not si
  if packed then
    local digits = string.match(stored, '^%d+$')
    if not digits then return nil end
    ${unpack('now_ms()').trim().replace(/\n/g, '\n    ')}
    if not si then return nil end
  end
  local index = si + 0
  if index ~= mark and index ~= mark + 1 then return nil end
  -- Read rather than left to the key's expiry, which Redis keeps for the ms it falls on.
  if now_ms() >= (mark + 2) * period_ms then return nil end
  local cur, prev = sc + 0, sp + 0
  if index == mark and cur > 0 then cur = max(0, cur - cost)
  elseif index == mark + 1 and prev > 0 then prev = max(0, prev - cost)
  else return nil end
  if packed then return ${packedOf('cur')} end
  return fmt('%d:%d:%d', index, cur, prev)
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

/**
 * The counts `[cur, prev]` of a packed value (see {@link PACKED_BASE}), read as the Lua reads
 * it; undefined for any other value. The window is the key's expiry's: it ends a period
 * before the key expires.
 */
export function unpackCounts(raw: string): State | undefined {
  if (!/^\d+$/.test(raw)) return undefined;
  const n = Number(raw);
  if (!(n < PACKED_END)) return undefined;
  const cur = n % PACKED_BASE;
  return [cur, ((n - cur) / PACKED_BASE) % PACKED_BASE];
}

export const slidingWindow: AlgorithmImpl = {
  tag: 'swc',
  evaluate: evaluateSlidingWindow,
  lua: { kind: 'value', decode, decide, refund },
};
