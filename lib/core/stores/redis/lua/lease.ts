import { createHash } from 'node:crypto';

/**
 * The Lua of concurrency limits (see `concurrency.ts`), in two parts: {@link LEASE_LUA}, which
 * CONSUME_SCRIPT runs for a concurrency limit's code (`5:<leaseId>`), beside the rate policies of the
 * same request (all-or-nothing, one call), and {@link RELEASE_SCRIPT}.
 *
 * The leases of a policy are a sorted set: member = lease id, score = its expiry in ms on the
 * store's clock (the Redis server's; a test clock's in tests). The set expires with its
 * longest lease.
 */

/**
 * Assigns the locals `lease_read` and `lease_take`, which CONSUME_SCRIPT declares and runs this
 * for only when a request has a concurrency limit (a closure made per call costs the others).
 * `lease_read(key, now)`: prunes the expired leases (score <= now) and returns how many are
 * held and the latest expiry (0 when none). The prune writes even when the request is
 * refused: what it deletes was no longer state.
 * `lease_take(key, now, id, lease_ms, last)`: adds the lease `id` expiring at `now + lease_ms`, and keeps the
 * set alive until its longest lease ends.
 */
export const LEASE_LUA = `
lease_read = function(key, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local held = redis.call('ZCARD', key)
  if held == 0 then return 0, 0 end
  return held, tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
end
lease_take = function(key, now, id, lease_ms, last)
  redis.call('ZADD', key, now + lease_ms, id)
  redis.call('PEXPIRE', key, math.max(lease_ms, last - now))
end
`;

/**
 * Gives back slots, one lease per key (all keys of one identity, so one hash slot). Returns
 * how many were held (a lease released twice, or expired, counts 0).
 */
export const RELEASE_SCRIPT = `
-- KEYS[i]   a concurrency limit's lease set
-- ARGV[i]   the lease id to remove from KEYS[i]
local freed = 0
for i = 1, #KEYS do freed = freed + redis.call('ZREM', KEYS[i], ARGV[i]) end
return freed
`;

/** SHA-1 of {@link RELEASE_SCRIPT}, as EVALSHA wants it. */
export const RELEASE_SHA = createHash('sha1').update(RELEASE_SCRIPT).digest('hex');
