/**
 * The floor of a Redis-backed limiter: one EVALSHA of an empty script per decision, which
 * decides nothing. Whatever a limiter does above that (keys, arguments, Lua, decoding,
 * headers) is its own cost; the round trip is not. Used by the `floor-redis` HTTP variant
 * and the `floor` store contender.
 */
import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';

export const FLOOR_LUA = 'return 1';
export const FLOOR_SHA = createHash('sha1').update(FLOOR_LUA).digest('hex');

/**
 * What the module sets on a client it creates from a URL (lib/nest/module/resources.ts, connect):
 * the floor pays what the module's own client pays, auto-pipelining included.
 */
export const MODULE_CLIENT_OPTIONS: RedisOptions = {
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  enableAutoPipelining: true,
  lazyConnect: true,
};

/** A connected client tuned as the module tunes its own, with the empty script loaded. */
export async function floorClient(url: string): Promise<Redis> {
  const client = new Redis(url, MODULE_CLIENT_OPTIONS);
  await client.connect();
  const sha = await client.script('LOAD', FLOOR_LUA);
  if (sha !== FLOOR_SHA) throw new Error(`SCRIPT LOAD gave ${String(sha)}, expected ${FLOOR_SHA}`);
  return client;
}

/**
 * One floor call: EVALSHA, and EVAL only on NOSCRIPT (a restart or SCRIPT FLUSH), as the
 * module's store sends its own script.
 */
export async function floorCall(client: Redis): Promise<void> {
  try {
    await client.evalsha(FLOOR_SHA, 0);
  } catch (error) {
    if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error;
    await client.eval(FLOOR_LUA, 0);
  }
}
