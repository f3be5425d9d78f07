/**
 * The floor of a Redis-backed limiter: one EVALSHA of an empty script per decision, which
 * decides nothing. Whatever a limiter does above that (keys, arguments, Lua, decoding,
 * headers) is its own cost; the round trip is not. Used by the `floor-redis` HTTP variant
 * and the `floor` store contender.
 */
import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';

export const FLOOR_LUA = 'return 1';
const FLOOR_SHA = createHash('sha1').update(FLOOR_LUA).digest('hex');

/**
 * What the module sets on a client it creates from a URL (lib/nest/module/resources.ts, connect):
 * the floor pays what the module's own client pays.
 */
const MODULE_CLIENT_OPTIONS: RedisOptions = {
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  enableAutoPipelining: false,
  lazyConnect: true,
};

/**
 * Client settings the floor is also measured on (issue 23): the module's; the module's with
 * auto-pipelining on, as it was before issue 23 (and as a client a user passes in may be);
 * and ioredis's defaults (what rate-limiter-flexible's and the throttler storage's users
 * pass: `new Redis(url)`).
 */
export const FLOOR_CLIENTS = {
  module: MODULE_CLIENT_OPTIONS,
  autopipelining: { ...MODULE_CLIENT_OPTIONS, enableAutoPipelining: true },
  defaults: { lazyConnect: true },
} satisfies Record<string, RedisOptions>;

/** A connected client tuned as `settings` says (the module's own by default), with the empty script loaded. */
export async function floorClient(
  url: string,
  settings: RedisOptions = MODULE_CLIENT_OPTIONS,
): Promise<Redis> {
  const client = new Redis(url, settings);
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
