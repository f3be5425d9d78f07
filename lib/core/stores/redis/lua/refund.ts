import { createHash } from 'node:crypto';
import { ALGORITHM_IMPLS } from '../../../algorithms/index.js';
import type { LuaForm, PolicyAlgorithm } from '../../../algorithms/types.js';
import {
  ALGORITHM_CODES,
  FIXED_WINDOW_MARK_SLACK_MS,
  luaDispatch,
  WINDOW_END_LUA,
} from './protocol.js';

/**
 * Gives back what one request spent under its policies, in one atomic call (the Lua of
 * `lib/core/model/refund.ts`, which states the rules; the state formats are CONSUME_SCRIPT's,
 * and each algorithm's refund is beside its decision in `core/algorithms/`). Its KEYS and
 * ARGV are listed at the top of its text.
 *
 * Token bucket and GCRA shrink the debt kept in the key's expiry (on a test clock, in the
 * value `"<expiryMs>:<credit>"`), deleting the key once nothing is owed; the fixed window
 * decrements its count, the sliding windows rewrite theirs with KEEPTTL. Returns the number of policies that got something back.
 */
const CODE_LIST = Object.entries(ALGORITHM_CODES)
  .filter(([name]) => ALGORITHM_IMPLS[name as PolicyAlgorithm].lua.kind !== 'leases')
  .map(([name, code]) => `${code} ${name}`)
  .join(', ');

export const REFUND_SCRIPT = `
-- KEYS[i]        policy i's state key; all keys of a call share one hash tag, hence one slot
-- ARGV[1]        '' on the Redis server clock, or a test clock in ms
-- then per policy, five values, in KEYS order:
--   code         the algorithm: ${CODE_LIST}
--   limit        units per period
--   period_ms    the period in ms
--   amount       what to give back: token bucket and GCRA the ticks still owed (see
--                owedTicks), the windows the cost
--   mark         where the request spent: the fixed window's end in ms (on the server clock),
--                the sliding window's index, the time in ms of the sliding log's hits
local floor, ceil, fmt, max, find, sub = math.floor, math.ceil, string.format, math.max, string.find, string.sub
local slack = ${FIXED_WINDOW_MARK_SLACK_MS}
${WINDOW_END_LUA.trim()}
local clock = tonumber(ARGV[1])
-- The time in ms, read only by the refunds that need it (a sliding log's, a sliding window's).
local function now_ms()
  if clock then return clock end
  local time = redis.call('TIME')
  return time[1] * 1000 + floor(time[2] / 1000)
end
local given = 0
for i = 1, #KEYS do
  local arg, key = i * 5 - 3, KEYS[i]
  local code, limit, period_ms = tonumber(ARGV[arg]), tonumber(ARGV[arg + 1]), tonumber(ARGV[arg + 2])
  local amount, mark = tonumber(ARGV[arg + 3]), tonumber(ARGV[arg + 4])
  local refunded
  ${luaDispatch(branchOf, '  ')}
  if refunded then given = given + 1 end
end
return given
`;

/** The branch of an algorithm's code in REFUND_SCRIPT, around its own Lua (see `LuaForm`). */
function branchOf(form: LuaForm): string | undefined {
  if (form.kind === 'debt' || form.kind === 'counter') return form.refund;
  if (form.kind === 'leases') return undefined;
  return `${form.refund.trim()}
local value = refund(redis.call('GET', key), mark, amount)
if value then
  refunded = true
  redis.call('SET', key, value, 'KEEPTTL')
end`;
}

/** SHA-1 of {@link REFUND_SCRIPT}. */
export const REFUND_SHA = createHash('sha1').update(REFUND_SCRIPT).digest('hex');
