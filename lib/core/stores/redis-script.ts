import { createHash } from 'node:crypto';
import { ALGORITHM_IMPLS } from '../algorithms/index.js';

/** Values per policy in ARGV, after ARGV[1] (clock override) and ARGV[2] (commit flag). */
export const ARGS_PER_POLICY = 5;
/** Values per policy in the reply, after reply[0] (1 when admitted). */
export const REPLY_PER_POLICY = 4;

const impls = Object.values(ALGORITHM_IMPLS).sort((a, b) => a.code - b.code);

/**
 * One script for every request: all policies of the request, any mix of algorithms,
 * decided and committed atomically, all-or-nothing (DESIGN §4).
 *
 * KEYS[i]: policy i's state key (all keys of a call share one hash tag).
 * ARGV[1]: `now` in ms for tests, or '' to read the Redis server clock with TIME.
 * ARGV[2]: '1' to commit an admitted request; '0' to decide only (writes nothing).
 * ARGV[5i-2 .. 5i+2]: policy i's algorithm code, limit, periodMs, capacity, cost.
 * Reply: `{ admitted (1|0), then per policy: allowed, remaining, resetMs, retryAfterMs }`,
 * all integers; retryAfterMs -1 stands for Infinity (Redis truncates Lua floats).
 */
export const CONSUME_SCRIPT = `
local floor, ceil, find, sub, fmt = math.floor, math.ceil, string.find, string.sub, string.format
${impls.map((i) => i.lua.trim()).join('\n')}
local algos = { ${impls.map((i) => i.lua.match(/local function (\w+)/)![1]).join(', ')} }

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + floor(t[2] / 1000)
end

local n = #KEYS
local out = { 1 }
local raws, vals, ttls = {}, {}, {}
for i = 1, n do
  local j = i * 5 - 2
  local raw = redis.call('GET', KEYS[i])
  local ok, rem, reset, retry, v, ttl = algos[tonumber(ARGV[j])](raw, now,
    tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4]))
  local k = i * 4 - 2
  out[k], out[k + 1], out[k + 2], out[k + 3] = ok, rem, reset, retry
  if ok == 0 then out[1] = 0 end
  raws[i], vals[i], ttls[i] = raw, v, ttl
end

if out[1] == 1 and ARGV[2] == '1' then
  for i = 1, n do
    if vals[i] then redis.call('SET', KEYS[i], vals[i], 'PX', ttls[i]) end
  end
else
  -- Nothing is spent on a denied request (or a decision only): report the admitting
  -- policies as they stand.
  for i = 1, n do
    local k, j = i * 4 - 2, i * 5 - 2
    if out[k] == 1 then
      local _, rem, reset = algos[tonumber(ARGV[j])](raws[i], now,
        tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), 0)
      out[k + 1], out[k + 2] = rem, reset
    end
  end
end
return out
`;

/** SHA-1 of {@link CONSUME_SCRIPT}, as EVALSHA wants it. */
export const CONSUME_SHA = createHash('sha1').update(CONSUME_SCRIPT).digest('hex');
