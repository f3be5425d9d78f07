import { createHash } from 'node:crypto';
import type { LuaForm } from '../../../algorithms/types.js';
import { CONTROL_LUA } from './control.js';
import { LEASE_LUA } from './lease.js';
import { lonePath, PACK_COUNTER_LUA, WRITE_ONE_LUA } from './lone.js';
import {
  ALGORITHM_CODES,
  BLOCK_LETTERS,
  LEASE_SEPARATOR,
  luaDispatch,
  MODES,
  PARSE_POLICY_LUA,
  WINDOW_END_LUA,
  WITH_CAPACITY_AND_COST,
} from './protocol.js';

/**
 * One script for every request: all policies of the request, any mix of algorithms,
 * decided and committed atomically, all-or-nothing: if one denies, none is spent. Its KEYS
 * and ARGV are listed at the top of its text; their encoding is `protocol.ts`'s.
 *
 * For a policy whose code is negative, the script also reads its identity's control hash
 * `<prefix>:{<identity>}:ctl` (overrides, exemption; see {@link CONTROL_LUA}): RedisStore
 * makes it so for the identities its index of controlled identities lists (see
 * control-index.ts), and for every identity while it has no index; the others pay for no
 * read. A policy with a penalty (see penalty.ts) has its block in the key `<KEYS[i]>:b`
 * (same slot), read with PTTL (on a test clock: GET, the value being the end in ms) only for
 * such policies. A concurrency limit's KEYS[i] is a sorted set of leases (see lease.ts),
 * taken only on commit once every policy admits; overrides do not apply to it, an exemption
 * takes no slot.
 *
 * Each algorithm's own Lua is in `core/algorithms/` (its `lua`), pasted into the branch of
 * its code ({@link luaDispatch}); the script around it reads the policies, applies controls
 * and penalties, and writes once every policy admits.
 *
 * Reply: each policy's state as it stood before this request, from which RedisStore
 * computes the reported numbers with the TypeScript reference (`reply.ts`), so the script
 * does no arithmetic it does not need for its own decision:
 * - token bucket and GCRA: the debt, in ticks of 1/L ms (an integer; with one such policy
 *   alone, the reply is that integer rather than an array);
 * - fixed window: the count and the ms its window has left (0 and 0: none open); with one
 *   such policy alone, without a control hash or a penalty, the reply is the integer
 *   `count × (2 × period_ms + 1) + ms left` (the ms left are at most two periods) rather than
 *   an array, while that is below 2^53;
 * - sliding window and sliding log: the stored value (or nil; a sliding window's packed
 *   value as the string it stands for) and the ms it is read at (`now`, or the time a packed
 *   value's expiry tells, see sliding-window.ts); a sliding window alone on the lone path
 *   (mode `c`, its code alone) replies the integer
 *   `(prev × (limit + 1) + cur) × period_ms + ms into its window` instead, where both counts
 *   are within the limit, the clock did not step back into an earlier window and that is
 *   below 2^53 (see PACK_WINDOWS_LUA);
 * - concurrency limits: the leases held and the ms until the last one expires;
 * - then, only when a control hash or a block applied to some policy, one string per
 *   policy: `x` when the identity is exempt (nothing spent, admitted), `L:P:C` for the
 *   limit, periodMs and capacity of an override in force, `b<ms>` for a block in force with
 *   its ms left, or '' for none. Under an override, every algorithm keeps its state in
 *   `<key>:o<untilMs>` (same slot), which expires no later than the override; token bucket
 *   and GCRA then keep their debt in the value, as on a test clock;
 * - last, in mode `m` only, each fixed-window policy's window end in ms, in KEYS order (a
 *   reply that would be one integer is then an array of it and the ends).
 *
 * The sliding window and the sliding log read `TIME` (once per script, only when one is
 * present) and keep their state in the value, the sliding window where it can its counts
 * only and its window in the expiry (the lone path then reads no clock within the window);
 * token bucket and GCRA keep a debt in the key's expiry (see gcra.ts), the fixed window its
 * window's end (see fixed-window.ts), and so read no clock.
 */
const CODE_LIST = Object.entries(ALGORITHM_CODES)
  .map(([name, code]) => `${code} ${name}`)
  .join(', ');

export const CONSUME_SCRIPT = `
-- KEYS[i]        policy i's state key; all keys of a call share one hash tag, hence one slot
-- ARGV[1]        mode: '${MODES.commit}' decide and commit an admitted request, '${MODES.decide}' decide only,
--                '${MODES.penalties}' decide and write only penalties, '${MODES.marked}' as '${MODES.commit}' and reply each fixed
--                window's end last; with a test clock, its ms follow ('${MODES.commit}1700000000000')
-- then per policy, in KEYS order:
--   code         the algorithm: ${CODE_LIST}
--                negated: also read the identity's control hash; + ${WITH_CAPACITY_AND_COST}: capacity and cost follow;
--                then '${LEASE_SEPARATOR}<leaseId>' for a concurrency limit, or a penalty's letter
--                (${BLOCK_LETTERS.join(' ')}, see protocol.ts) and its block in ms
--   limit        units per period (a concurrency limit: slots)
--   period_ms    the period in ms (a concurrency limit: the lease)
--   capacity     only with code + ${WITH_CAPACITY_AND_COST}: the largest cost admitted at once (else the limit)
--   cost         only with code + ${WITH_CAPACITY_AND_COST}: units to spend, 0 to peek (else 1)
--
-- Every call runs this whole chunk, so the path of one or two token bucket or GCRA policies
-- without controls, penalties or leases makes no table, closure or string it does not send
-- (bench/redis: instructions per call): numbers go to redis.call as '%d' strings (Redis would
-- print them with '%.17g'), a lone policy's state is returned without a table, and the tables
-- of two policies are made at their size (each growth of a Lua table rehashes it).
local floor, ceil, fmt, argv, call = math.floor, math.ceil, string.format, ARGV, redis.call
${lonePath().trim()}
local mode = argv[1]
local commit, clock, with_time = mode == '${MODES.commit}', nil, false
if not commit and mode ~= '${MODES.decide}' then
  local first = string.byte(mode)
  with_time = first == ${MODES.marked.charCodeAt(0)}
  commit = with_time or first == ${MODES.commit.charCodeAt(0)}
  clock = tonumber(string.sub(mode, 2))
end
-- Penalties are written on commit, and in the mode that writes only them.
local writes_penalties = commit or string.byte(mode) == ${MODES.penalties.charCodeAt(0)}
local now = clock
-- A sliding window's state of this loop's own keeps the string form (see PACKED_BASE): the
-- packed one would cost it a PTTL more; only the lone path reads that cheaper.
local prefer_packed = false
local policy_count = #KEYS
-- The reply, made only when it holds more than one lone policy's state as one integer (lone).
local reply, lone, reply_count = nil, nil, 0
local all_admit = true
-- What the commit writes once every policy admits: key, value, ttl_ms, and 'e' to keep the
-- value (keep_value), 'i' to add it (increments), 'v' to keep the expiry (keep_ttl) or false.
local writes, write_count = nil, 0
-- Blocks to start (key, ms, state key to delete or false); leases to take.
local block_starts, block_start_count = nil, 0
local lease_read, lease_take
local lease_takes, lease_take_count = nil, 0
local control_hashes, effects = nil, nil
-- In mode '${MODES.marked}': per fixed-window policy, its key (or on a test clock its end).
local marks
-- arg: where the next policy's values start in ARGV.
local arg = 2
for i = 1, policy_count do
  local key = KEYS[i]
  ${PARSE_POLICY_LUA.trim().replace(/\n/g, '\n  ')}
  -- The cost asked, before an exemption makes it 0: only a request that spends starts, extends
  -- or lifts a block (compared there, so that a policy without one pays for no comparison).
  local asked = cost
  -- Set by the algorithm's branch: the new value and its TTL in ms, with keep_value when only
  -- the expiry moves, keep_ttl when only the value does (the key already expires then),
  -- increments when the value is to be added (INCRBY keeps the expiry); whether its own
  -- state denies (which also clears all_admit).
  local value, ttl_ms, keep_value, keep_ttl, increments, denies
  local override_until, control_applied
  ${CONTROL_LUA.trim().replace(/\n/g, '\n  ')}
  ${luaDispatch(branchOf, '  ')}
  if block_ms then
    -- The policy's block, <policy key>:b (see penalty.ts): its expiry is the block's end,
    -- or on a test clock its value. Exemptions and overrides set it aside and lift it.
    local block_key = KEYS[i] .. ':b'
    if control_applied then
      if writes_penalties and asked > 0 then call('DEL', block_key) end
    else
      local left
      if clock then left = (tonumber(call('GET', block_key)) or 0) - clock
      else left = call('PTTL', block_key) end
      if left > 0 then
        all_admit, ttl_ms = false, nil
        if block_extends and writes_penalties and asked > 0 then
          -- pcall: a store that cannot write (OOM, read-only) still refuses; the block
          -- just does not start again.
          redis.pcall('SET', block_key, fmt('%d', (clock or 0) + block_ms), 'PX', fmt('%d', block_ms))
          left = block_ms
        end
        effects = effects or {}
        effects[i] = 'b' .. left
      elseif denies and asked > 0 then
        block_starts = block_starts or {}
        block_starts[block_start_count + 1], block_starts[block_start_count + 2] = block_key, block_ms
        block_starts[block_start_count + 3] = block_resets and KEYS[i] or false
        block_start_count = block_start_count + 3
      end
    end
  end
  -- An override's state means nothing once it ends: it expires then, not a period later.
  if override_until and ttl_ms and ttl_ms > override_until - now then ttl_ms = override_until - now end
  if ttl_ms and commit then
    -- One policy alone decides the request; with several, write only once all admit.
    -- A test clock is not the clock of the key's expiry: there the expiry moves with the value.
    if clock then keep_ttl = false end
    if policy_count == 1 then
      ${WRITE_ONE_LUA.trim().replace(/\n/g, '\n      ')}
    else
      writes = writes or { nil, nil, nil, nil, nil, nil, nil, nil }
      writes[write_count + 1], writes[write_count + 2] = key, value
      writes[write_count + 3] = ttl_ms
      writes[write_count + 4] = keep_value and 'e' or increments and 'i' or keep_ttl and 'v' or false
      write_count = write_count + 4
    end
  end
end
if block_starts and writes_penalties then
  -- pcall, as above: the refusal stands when the block cannot be written.
  for k = 1, block_start_count, 3 do
    local block_ms = block_starts[k + 1]
    redis.pcall('SET', block_starts[k], fmt('%d', (clock or 0) + block_ms), 'PX', fmt('%d', block_ms))
    if block_starts[k + 2] then redis.pcall('DEL', block_starts[k + 2]) end
  end
end
if all_admit and writes then
  for k = 1, write_count, 4 do
    local keep = writes[k + 3]
    if keep == 'e' then call('PEXPIRE', writes[k], fmt('%d', writes[k + 2]))
    elseif keep == 'i' then call('INCRBY', writes[k], writes[k + 1])
    elseif keep then call('SET', writes[k], writes[k + 1], 'KEEPTTL')
    else call('PSETEX', writes[k], fmt('%d', writes[k + 2]), writes[k + 1]) end
  end
end
if all_admit and lease_takes then
  for k = 1, lease_take_count, 4 do
    lease_take(lease_takes[k], now, lease_takes[k + 1], lease_takes[k + 2], lease_takes[k + 3])
  end
end
local length = reply_count
if effects then
  reply = reply or { lone }
  for i = 1, policy_count do reply[reply_count + i] = effects[i] or '' end
  length = reply_count + policy_count
elseif lone then
  if not with_time then return lone end
  reply, length = { lone }, 1
end
if with_time and marks then
  ${WINDOW_END_LUA.trim().replace(/\n/g, '\n  ')}
  reply = reply or {}
  for k = 1, #marks do
    local mark = marks[k]
    if type(mark) == 'string' then mark = window_end(mark) end
    reply[length + k] = mark
  end
end
return reply or {}
`;

/**
 * The branch of an algorithm's code in CONSUME_SCRIPT, around its own Lua (see `LuaForm`):
 * it reads the state the algorithm's kind keeps, and adds the state as it stood to the reply.
 */
function branchOf(form: LuaForm): string {
  if (form.kind === 'debt') {
    return `${form.decide.trim()}
reply_count = reply_count + 1
if policy_count == 1 then lone = debt else
  reply = reply or { nil, nil, nil, nil }
  reply[reply_count] = debt
end`;
  }
  if (form.kind === 'counter') {
    return `${form.decide.trim()}
if with_time then
  -- The window's end, read once written (see WINDOW_END_LUA): on a test clock, the value's.
  marks = marks or {}
  marks[#marks + 1] = window_clock and window_clock + (left_ms > 0 and left_ms or period_ms) or key
end
reply_count = reply_count + 2
${PACK_COUNTER_LUA.trim()}
if policy_count == 1 and not block_ms and not effects and packed then lone = packed
elseif reply then reply[reply_count - 1], reply[reply_count] = count, left_ms
else reply = { count, left_ms } end`;
  }
  if (form.kind === 'value') {
    return `if not now then
  local time = call('TIME')
  now = time[1] * 1000 + floor(time[2] / 1000)
end
local stored, at = call('GET', key), now
${form.decide.trim()}
if denies then all_admit = false end
-- Made at its size for the first policy: each growth of a table rehashes it.
if reply then reply[reply_count + 1], reply[reply_count + 2] = stored, at
else reply = { stored, at } end
reply_count = reply_count + 2`;
  }
  return `if not now then
  local time = call('TIME')
  now = time[1] * 1000 + floor(time[2] / 1000)
end
if not lease_read then
  ${LEASE_LUA.trim().replace(/\n/g, '\n  ')}
end
local held, last = lease_read(key, now)
reply = reply or {}
reply[reply_count + 1], reply[reply_count + 2] = held, last > now and last - now or 0
reply_count = reply_count + 2
if held + cost > limit then all_admit, denies = false, true
elseif cost > 0 and commit then
  lease_takes = lease_takes or {}
  lease_takes[lease_take_count + 1], lease_takes[lease_take_count + 2] = key, lease_id
  lease_takes[lease_take_count + 3], lease_takes[lease_take_count + 4] = period_ms, last
  lease_take_count = lease_take_count + 4
end`;
}

/** SHA-1 of {@link CONSUME_SCRIPT}, as EVALSHA wants it. */
export const CONSUME_SHA = createHash('sha1').update(CONSUME_SCRIPT).digest('hex');
