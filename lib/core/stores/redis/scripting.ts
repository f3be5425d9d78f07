import type { Cluster, Redis } from 'ioredis';
import { seeErrorsPage } from '../../errors-page.js';

/** Clients already warned about: one warning per client, however many stores share it. */
const warned = new WeakSet<object>();

/** Emits a `NRL_UNSAFE_REDIS_CLIENT` warning, once per client, when {@link replaySettings} finds any. */
export function warnIfReplaying(client: Redis | Cluster): void {
  const unsafe = replaySettings(client);
  if (unsafe.length === 0 || warned.has(client)) return;
  warned.add(client);
  process.emitWarning(
    `this Redis client may send a rate-limit script twice and count one request twice; set ${unsafe.join(', ')} ${seeErrorsPage('NRL_UNSAFE_REDIS_CLIENT')}`,
    { code: 'NRL_UNSAFE_REDIS_CLIENT' },
  );
}

/**
 * The settings of an ioredis client that could send a script again after it ran (its
 * reply lost with the connection) and so count one request twice: a standalone client
 * must not re-send unfulfilled commands; a Cluster client must not retry after a failover
 * delay either.
 * @returns the settings to change, as `name: value` strings; empty when safe
 */
export function replaySettings(client: Redis | Cluster): string[] {
  const unsafe: string[] = [];
  if (client.isCluster) {
    const options = (client as Cluster).options;
    if (options.retryDelayOnFailover !== 0) unsafe.push('retryDelayOnFailover: 0');
    if (options.redisOptions?.autoResendUnfulfilledCommands !== false) {
      unsafe.push('redisOptions.autoResendUnfulfilledCommands: false');
    }
  } else if ((client as Redis).options.autoResendUnfulfilledCommands !== false) {
    unsafe.push('autoResendUnfulfilledCommands: false');
  }
  return unsafe;
}

function clientKeyPrefix(client: Redis | Cluster): string {
  const options = client.options as { keyPrefix?: string; redisOptions?: { keyPrefix?: string } };
  return options.keyPrefix ?? options.redisOptions?.keyPrefix ?? '';
}

/**
 * The keys starting with `keyPrefix`, without the client's own keyPrefix: SCAN on a
 * standalone server; on Cluster only the slot of the prefix's hash tag, on its master.
 */
export async function findKeys(client: Redis | Cluster, keyPrefix: string): Promise<string[]> {
  // SCAN and GETKEYSINSLOT see the client's own keyPrefix; commands add it again.
  const own = clientKeyPrefix(client);
  const found = client.isCluster
    ? await keysInSlot(client as Cluster, own + keyPrefix)
    : await scanKeys(client as Redis, own + keyPrefix);
  return found.map((key) => key.slice(own.length));
}

async function scanKeys(client: Redis, keyPrefix: string): Promise<string[]> {
  const pattern = `${keyPrefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/** Reads only the one slot the identity's hash tag maps to, on the master that owns it. */
async function keysInSlot(cluster: Cluster, keyPrefix: string): Promise<string[]> {
  const slot = (await cluster.cluster('KEYSLOT', keyPrefix)) as number;
  const found = await Promise.all(
    cluster.nodes('master').map(async (node) => {
      const count = (await node.cluster('COUNTKEYSINSLOT', slot)) as number;
      return count > 0 ? ((await node.cluster('GETKEYSINSLOT', slot, count)) as string[]) : [];
    }),
  );
  return found.flat().filter((key) => key.startsWith(keyPrefix));
}

/**
 * Splits policy indexes by the Cluster hash tag of their keys (the `{...}` part), in order;
 * policies of one identity share a tag, hence a slot.
 */
export function groupByHashTag(policies: readonly { readonly key: string }[]): number[][] {
  const groups = new Map<string, number[]>();
  policies.forEach((p, i) => {
    const open = p.key.indexOf('{');
    const tag = p.key.slice(open, p.key.indexOf('}', open) + 1);
    const group = groups.get(tag);
    if (group) group.push(i);
    else groups.set(tag, [i]);
  });
  return [...groups.values()];
}

export function pairsToRecord(pairs: readonly string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) record[pairs[i]!] = pairs[i + 1]!;
  return record;
}

export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * Runs a script by EVALSHA, and sends it in full (EVAL) only when Redis answers `NOSCRIPT`:
 * the script did not run then, so sending it again cannot run it twice.
 */
export async function evalScript(
  client: Redis | Cluster,
  script: string,
  sha: string,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await client.evalsha(sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return await client.eval(script, keys.length, ...keys, ...args);
  }
}
