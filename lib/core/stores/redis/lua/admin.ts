import { createHash } from 'node:crypto';

/**
 * Reads every given key of one identity at one instant: the operator's `inspect`.
 * Reply: `now` in ms, then per key its `PTTL` and its value: the string (`GET`), the fields
 * of a hash as `HGETALL` gives them, the leases of a concurrency limit (a sorted set) as
 * `ZRANGE ... WITHSCORES` gives them, or nil when the key has gone.
 */
export const INSPECT_SCRIPT = `
-- KEYS      the keys found (by SCAN, or GETKEYSINSLOT on Cluster: never a keyspace scan in
--           here); all share one hash tag, so one slot
-- ARGV[1]   '' for the Redis server clock, or a test clock's ms
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
local out = { now }
for i = 1, #KEYS do
  local key = KEYS[i]
  local kind = redis.call('TYPE', key).ok
  local v = false
  if kind == 'string' then v = redis.call('GET', key)
  elseif kind == 'hash' then v = redis.call('HGETALL', key)
  elseif kind == 'zset' then v = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES') end
  out[2 * i] = redis.call('PTTL', key)
  out[2 * i + 1] = v
end
return out
`;

/**
 * Reads or changes one control hash (overrides and exemptions; see `controlKey` in
 * core/model/store-keys.ts) on the Redis server clock.
 *
 * `s` writes `field` = `"<now + ttlMs>[:<ARGV[4]>]"` and its reason, then moves the hash's
 * expiry to the later of its current one and that `untilMs` (never shortening another
 * entry's life): `PEXPIREAT` on the server clock, the equivalent `PEXPIRE` on a test clock.
 * `s` and `d` first delete fields whose `untilMs` has passed (with their reasons).
 * Reply: `{ now, HGETALL after the change, fields deleted by d }`.
 */
export const CONTROL_SCRIPT = `
local key = KEYS[1]               -- the control hash
local op = ARGV[1]                -- 'g' get, 's' set a field, 'd' delete a field
local clock = tonumber(ARGV[2])   -- '' for the server clock, or a test clock's ms
local field = ARGV[3]             -- the field to set or delete
local rest = ARGV[4]              -- what follows '<untilMs>:' in the value ('': nothing, as for 'exempt')
local ttl_ms = ARGV[5]            -- how long the field lasts, in ms
local reason = ARGV[6]            -- kept in 'r:<field>'
local now = clock
if not now then
  local time = redis.call('TIME')
  now = time[1] * 1000 + math.floor(time[2] / 1000)
end
local removed = 0
if op ~= 'g' then
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local name = all[i]
    if string.sub(name, 1, 2) ~= 'r:' then
      local until_ms = tonumber(string.match(all[i + 1], '^%d+'))
      if not until_ms or until_ms <= now then redis.call('HDEL', key, name, 'r:' .. name) end
    end
  end
end
if op == 's' then
  local until_ms = now + tonumber(ttl_ms)
  local value = string.format('%d', until_ms)
  if rest ~= '' then value = value .. ':' .. rest end
  redis.call('HSET', key, field, value, 'r:' .. field, reason)
  local left_ms = redis.call('PTTL', key)
  local target = until_ms
  if left_ms > 0 and now + left_ms > target then target = now + left_ms end
  if clock then redis.call('PEXPIRE', key, target - now)
  else redis.call('PEXPIREAT', key, target) end
elseif op == 'd' then
  removed = redis.call('HDEL', key, field, 'r:' .. field)
end
return { now, redis.call('HGETALL', key), removed }
`;

/** SHA-1 of {@link INSPECT_SCRIPT}, as EVALSHA wants it. */
export const INSPECT_SHA = createHash('sha1').update(INSPECT_SCRIPT).digest('hex');
/** SHA-1 of {@link CONTROL_SCRIPT}, as EVALSHA wants it. */
export const CONTROL_SHA = createHash('sha1').update(CONTROL_SCRIPT).digest('hex');
