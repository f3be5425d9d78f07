import { ALGORITHM_IMPLS } from '../../../algorithms/index.js';
import type { LuaForm } from '../../../algorithms/types.js';
import {
  PACKED_BASE,
  PACKED_END,
  PACKED_MIN_PERIOD_MS,
  packedCountsLua,
} from '../../../algorithms/sliding-window.js';
import { ALGORITHM_CODES, MODES } from './protocol.js';

/**
 * Lua: writes one policy's new state (the consume script's locals `key`, `value`, `ttl_ms`,
 * `keep_value`, `increments`, `keep_ttl`): `PEXPIRE` when only the expiry moves, `INCRBY`
 * when the value is added, `SET ... KEEPTTL` when only the value changes, else `PSETEX`.
 * KEEPTTL and PSETEX: Redis parses no expiry option (`SET ... PX` costs 40% and 8% more).
 */
export const WRITE_ONE_LUA = `
if keep_value then call('PEXPIRE', key, fmt('%d', ttl_ms))
elseif increments then call('INCRBY', key, value)
elseif keep_ttl then call('SET', key, value, 'KEEPTTL')
else call('PSETEX', key, fmt('%d', ttl_ms), value) end
`;

/**
 * Lua: a fixed window's `count` and `left_ms` as the one integer a lone fixed-window policy
 * replies, `count × (2·period_ms + 1) + left_ms` (`left_ms` is at most two periods), in
 * `packed`; false when it would reach 2^53, where the reply is the pair.
 */
export const PACK_COUNTER_LUA = `
local span = 2 * period_ms + 1
local packed = count < 9007199254740992 / span and count * span + left_ms
`;

/**
 * Lua: a sliding window's state as it stood (its counts `cur` and `prev` in its window, and
 * `elapsed`, the ms its reading is into that window) as the one integer a lone
 * sliding-window policy replies, `(prev × (limit + 1) + cur) × period_ms + elapsed`, in
 * `packed`; false when a count is past the limit (the limit was lowered), the clock stepped
 * back into an earlier window, or the integer would reach 2^53, where the reply is the
 * general loop's, the value and the ms it was read at.
 */
const PACK_WINDOWS_LUA = `
local base = limit + 1
local packed = elapsed >= 0 and cur <= limit and prev <= limit
  and base * base * period_ms < 9007199254740992 and (prev * base + cur) * period_ms + elapsed
`;

/**
 * Lua: a sliding window's request within the stored window of a packed value (see
 * `PACKED_BASE` in sliding-window.ts), decided from the key's expiry without `TIME`: the
 * window goes on while more than a period is left before the key expires, and the ms into
 * it are two periods less what is left. Admitted, it adds its cost (`INCRBY` keeps the
 * expiry); either way it replies as PACK_WINDOWS_LUA, or where that integer would reach 2^53
 * (a limit above about 50,000 an hour) the state as the general loop replies it, in a window
 * of index 0 read at the ms into it. Any other case (a new window, no state, the string form,
 * a count past the limit) falls through to the decision on the clock, which reads the packed
 * value alike.
 */
const STORED_WINDOW_LUA = `
-- Digits as the script writes them: INCRBY fails on a leading zero ('05'), which the
-- decision on the clock reads and rewrites.
if stored and limit < ${PACKED_BASE} and period_ms >= ${PACKED_MIN_PERIOD_MS} and string.match(stored, '^[1-9]%d*$') then
  local left_ms, n = call('PTTL', key), stored + 0
  if left_ms > period_ms and left_ms <= 2 * period_ms and n < ${PACKED_END} then
    local cur, prev, elapsed = 0, 0, 2 * period_ms - left_ms
    ${packedCountsLua('cur', 'prev').replace(/\n/g, '\n    ')}
    if cur <= limit and prev <= limit then
      if prev * (left_ms - period_ms) + (cur + 1) * period_ms <= limit * period_ms then call('INCRBY', key, '1') end
      ${PACK_WINDOWS_LUA.trim().replace(/\n/g, '\n      ')}
      return packed or { fmt('0:%d:%d', cur, prev), elapsed }
    end
  end
end
`;

const form = (algorithm: 'gcra' | 'fixed-window' | 'sliding-window'): LuaForm =>
  ALGORITHM_IMPLS[algorithm].lua;

function decideOf(f: LuaForm): string {
  if (f.kind === 'leases') throw new TypeError(`no lone path for ${f.kind}`);
  return f.decide.trim();
}

/**
 * Lua, run first by the consume script: the request most requests are, one token bucket,
 * GCRA, fixed window or sliding window policy on the server clock, committed, with no
 * capacity or cost of its own, no control hash, penalty or lease (its code alone in ARGV[2]).
 * It pastes the same algorithm chunks and write as the general loop, which decides such a
 * request alike (test/integration/lone-path.test.ts), and skips what the loop does for the
 * requests that are not: reading a policy's code and options, the controls, the penalties,
 * the writes held until every policy admits (about 8% of a GCRA decision's instructions in
 * Redis), and a table for the reply (one integer instead, see reply.ts).
 */
export function lonePath(): string {
  const debtCodes = (['gcra', 'token-bucket'] as const).map((a) => `'${ALGORITHM_CODES[a]}'`);
  const fixed = `'${ALGORITHM_CODES['fixed-window']}'`;
  const sliding = `'${ALGORITHM_CODES['sliding-window']}'`;
  const indent = (text: string, pad: string) => text.trim().replace(/\n/g, `\n${pad}`);
  return `
if argv[1] == '${MODES.commit}' and #KEYS == 1 then
  local encoded = argv[2]
  local debt_code = ${debtCodes.map((c) => `encoded == ${c}`).join(' or ')}
  if debt_code or encoded == ${fixed} then
    local key, limit, period_ms, cost = KEYS[1], argv[3] + 0, argv[4] + 0, 1
    local capacity, clock, now, override_until = limit, nil, nil, nil
    local all_admit, denies, value, ttl_ms, keep_value, keep_ttl, increments = true
    local lone
    if debt_code then
      ${indent(decideOf(form('gcra')), '      ')}
      lone = debt
    else
      ${indent(decideOf(form('fixed-window')), '      ')}
      ${indent(PACK_COUNTER_LUA, '      ')}
      lone = packed or { count, left_ms }
    end
    if ttl_ms then
      ${indent(WRITE_ONE_LUA, '      ')}
    end
    return lone
  elseif encoded == ${sliding} then
    local key, limit, period_ms, cost = KEYS[1], argv[3] + 0, argv[4] + 0, 1
    local stored = call('GET', key)
    ${indent(STORED_WINDOW_LUA, '    ')}
    local time = call('TIME')
    local now = time[1] * 1000 + floor(time[2] / 1000)
    local clock, override_until, prefer_packed, at = nil, nil, true, now
    local denies, value, ttl_ms, keep_value, keep_ttl, increments
    ${indent(decideOf(form('sliding-window')), '    ')}
    if ttl_ms then
      ${indent(WRITE_ONE_LUA, '      ')}
    end
    local elapsed = at - index * period_ms
    ${indent(PACK_WINDOWS_LUA, '    ')}
    return packed or { stored, at }
  end
end`;
}
