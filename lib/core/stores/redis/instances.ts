import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { isNoScript } from './scripting.js';

/**
 * One process's announcement that it shares the store, and the count of those alive: the
 * `instances` that insurance limits learn (see `lib/nest/module/instances.ts`).
 *
 * KEYS[1]: a sorted set, member = process id, score = when it last announced, in ms on the
 * Redis server clock (so processes with skewed clocks agree). ARGV[1]: this process's id;
 * ARGV[2]: how long an announcement lives, in ms. Members older than that are dropped, and
 * the set itself expires with its newest member, like every key the limiter writes.
 * Reply: how many processes announced within the last ARGV[2] ms, this one included.
 */
const ANNOUNCE_SCRIPT = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local live = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - live)
redis.call('PEXPIRE', KEYS[1], live)
return redis.call('ZCARD', KEYS[1])
`;

const ANNOUNCE_SHA = createHash('sha1').update(ANNOUNCE_SCRIPT).digest('hex');

/**
 * Runs {@link ANNOUNCE_SCRIPT} once (EVALSHA, then EVAL on NOSCRIPT).
 * @param liveMs how long the announcement counts, in **ms**
 * @returns the processes alive, >= 1
 * @throws whatever the client throws
 */
export async function announceInstance(
  client: Redis | Cluster,
  key: string,
  id: string,
  liveMs: number,
): Promise<number> {
  try {
    return (await client.evalsha(ANNOUNCE_SHA, 1, key, id, liveMs)) as number;
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return (await client.eval(ANNOUNCE_SCRIPT, 1, key, id, liveMs)) as number;
  }
}
