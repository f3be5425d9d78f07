import { createHash } from 'node:crypto';

/**
 * Gives back what one request spent under its policies, in one atomic call (the Lua of
 * `lib/core/model/refund.ts`, which states the rules; the state formats are CONSUME_SCRIPT's).
 *
 * KEYS[i]: policy i's state key (all keys of a call share one hash tag).
 * ARGV[1]: '' on the Redis server clock, or a test clock in ms.
 * ARGV[5i-3 .. 5i+1]: policy i's algorithm code, limit, periodMs, the amount (token bucket
 * and GCRA: the ticks still owed, see owedTicks; windows: the cost), and mark (the fixed
 * window's end, the sliding window's index).
 *
 * Token bucket and GCRA shrink the debt kept in the key's expiry (on a test clock, in the
 * value `"<expiryMs>:<credit>"`), deleting the key once nothing is owed; the windows
 * rewrite their count with KEEPTTL. Returns the number of policies that got something back.
 */
export const REFUND_SCRIPT = `
local floor, ceil, fmt = math.floor, math.ceil, string.format
local clock = tonumber(ARGV[1])
local given = 0
for i = 1, #KEYS do
  local j, key = i * 5 - 3, KEYS[i]
  local code, L, P, cost, mark = tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4])
  if code > 2 then
    local debt = 0
    if clock then
      local s = redis.call('GET', key)
      local c = s and string.find(s, ':', 1, true)
      local e = c and tonumber(string.sub(s, 1, c - 1))
      if e and e >= clock then debt = (e - clock) * L - (tonumber(string.sub(s, c + 1)) or 0) end
    else
      local ms = redis.call('PTTL', key)
      if ms >= 0 then
        debt = ms * L
        local credit = tonumber(redis.call('GET', key))
        if credit and credit > 0 and credit < L and credit == floor(credit) then debt = debt - credit end
      end
    end
    if debt > 0 then
      given = given + 1
      local left = debt - cost
      if left <= 0 then
        redis.call('DEL', key)
      else
        local ttl = ceil(left / L)
        local v = ttl * L - left
        if clock then v = fmt('%d:%d', clock + ttl, v) end
        redis.call('SET', key, v, 'PX', ttl)
      end
    end
  else
    local s = redis.call('GET', key)
    local a = s and string.find(s, ':', 1, true)
    if a then
      local x, y = tonumber(string.sub(s, 1, a - 1)), string.sub(s, a + 1)
      local v
      if code == 1 then
        local wend = tonumber(y)
        if wend == mark and x > 0 then v = fmt('%d:%d', math.max(0, x - cost), wend) end
      else
        local b = string.find(y, ':', 1, true)
        local cur, prev = tonumber(string.sub(y, 1, b - 1)), tonumber(string.sub(y, b + 1))
        if x == mark and cur > 0 then v = fmt('%d:%d:%d', x, math.max(0, cur - cost), prev)
        elseif x == mark + 1 and prev > 0 then v = fmt('%d:%d:%d', x, cur, math.max(0, prev - cost)) end
      end
      if v then
        given = given + 1
        redis.call('SET', key, v, 'KEEPTTL')
      end
    end
  end
end
return given
`;

/** SHA-1 of {@link REFUND_SCRIPT}. */
export const REFUND_SHA = createHash('sha1').update(REFUND_SCRIPT).digest('hex');
