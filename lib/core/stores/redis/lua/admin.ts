import { createHash } from 'node:crypto';

/**
 * Reads every given key of one identity at one instant: the operator's `inspect`.
 *
 * KEYS: the keys found (by SCAN, or GETKEYSINSLOT on Cluster: never a keyspace scan in
 * here); all share one hash tag, so one slot. ARGV[1]: `''` for the Redis server clock, or
 * a test clock's ms.
 * Reply: `now` in ms, then per key its `PTTL` and its value: the string (`GET`), the fields
 * of a hash as `HGETALL` gives them, the leases of a concurrency limit (a sorted set) as
 * `ZRANGE ... WITHSCORES` gives them, or nil when the key has gone.
 */
export const INSPECT_SCRIPT = `
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
 * KEYS[1]: the control key. ARGV[1]: `g` (get), `s` (set) or `d` (delete a field);
 * ARGV[2]: `''` for the server clock, or a test clock's ms; ARGV[3]: the field;
 * ARGV[4]: what follows `<untilMs>:` in the value (`''`: nothing, as for `exempt`);
 * ARGV[5]: ttlMs; ARGV[6]: the reason, kept in `r:<field>`.
 *
 * `s` writes `field` = `"<now + ttlMs>[:<ARGV[4]>]"` and its reason, then moves the hash's
 * expiry to the later of its current one and that `untilMs` (never shortening another
 * entry's life): `PEXPIREAT` on the server clock, the equivalent `PEXPIRE` on a test clock.
 * `s` and `d` first delete fields whose `untilMs` has passed (with their reasons).
 * Reply: `{ now, HGETALL after the change, fields deleted by d }`.
 */
export const CONTROL_SCRIPT = `
local key, op, clock = KEYS[1], ARGV[1], tonumber(ARGV[2])
local now = clock
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
local removed = 0
if op ~= 'g' then
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 2) ~= 'r:' then
      local u = tonumber(string.match(all[i + 1], '^%d+'))
      if not u or u <= now then redis.call('HDEL', key, f, 'r:' .. f) end
    end
  end
end
if op == 's' then
  local field, untilMs = ARGV[3], now + tonumber(ARGV[5])
  local v = string.format('%d', untilMs)
  if ARGV[4] ~= '' then v = v .. ':' .. ARGV[4] end
  redis.call('HSET', key, field, v, 'r:' .. field, ARGV[6])
  local ttl = redis.call('PTTL', key)
  local target = untilMs
  if ttl > 0 and now + ttl > target then target = now + ttl end
  if clock then redis.call('PEXPIRE', key, target - now)
  else redis.call('PEXPIREAT', key, target) end
elseif op == 'd' then
  removed = redis.call('HDEL', key, ARGV[3], 'r:' .. ARGV[3])
end
return { now, redis.call('HGETALL', key), removed }
`;

/** SHA-1 of {@link INSPECT_SCRIPT}, as EVALSHA wants it. */
export const INSPECT_SHA = createHash('sha1').update(INSPECT_SCRIPT).digest('hex');
/** SHA-1 of {@link CONTROL_SCRIPT}, as EVALSHA wants it. */
export const CONTROL_SHA = createHash('sha1').update(CONTROL_SCRIPT).digest('hex');
