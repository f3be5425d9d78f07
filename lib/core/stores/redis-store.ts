import type { Cluster, Redis } from 'ioredis';
import { ALGORITHM_IMPLS } from '../algorithms/index.js';
import { ARGS_PER_POLICY, CONSUME_SCRIPT, CONSUME_SHA, REPLY_PER_POLICY } from './redis-script.js';
import type { RateLimitStore, StoreOutcome, StorePolicy } from './store.js';

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * An ioredis client: `Redis` (standalone, or Sentinel through its options) or `Cluster`.
   * The store never closes it. For a limiter, configure it to fail fast rather than queue
   * or re-send: `enableOfflineQueue: false`, `autoResendUnfulfilledCommands: false`,
   * `maxRetriesPerRequest: 0`.
   */
  client: Redis | Cluster;
  /**
   * **Tests only.** Replaces the Redis server clock (`TIME`) with this one, in ms since the
   * epoch. In production every instance must share the Redis clock, so leave it unset.
   */
  clock?: () => number;
}

/**
 * Rate-limit state in Redis: one Lua script call per request evaluates every policy of
 * the request atomically (DESIGN §4). Time comes from the Redis server (`TIME`), so
 * instances with skewed clocks still agree.
 *
 * The script is sent by EVALSHA; only when Redis answers `NOSCRIPT` (after a restart,
 * failover or `SCRIPT FLUSH`) is it sent again with EVAL. Nothing else is retried.
 */
export class RedisStore implements RateLimitStore {
  private readonly client: Redis | Cluster;
  private readonly clock: (() => number) | undefined;

  constructor(options: RedisStoreOptions) {
    this.client = options.client;
    this.clock = options.clock;
  }

  async consume(policies: readonly StorePolicy[]): Promise<StoreOutcome[]> {
    const groups = this.client.isCluster ? groupByHashTag(policies) : [];
    if (groups.length <= 1) return this.consumeOne(policies);
    // Keys of different identities may live on different Cluster nodes: decide one identity
    // at a time, and once one denies, only read the rest.
    const outcomes: StoreOutcome[] = new Array(policies.length);
    let allowed = true;
    for (const group of groups) {
      const batch = group.map((i) => (allowed ? policies[i]! : { ...policies[i]!, cost: 0 }));
      const result = await this.consumeOne(batch);
      allowed &&= result.every((o) => o.allowed);
      group.forEach((i, k) => (outcomes[i] = result[k]!));
    }
    return outcomes;
  }

  private async consumeOne(policies: readonly StorePolicy[]): Promise<StoreOutcome[]> {
    const args: (string | number)[] = [this.clock ? this.clock() : ''];
    for (const p of policies) {
      args.push(ALGORITHM_IMPLS[p.algorithm].code, p.limit, p.periodMs, p.capacity, p.cost);
    }
    const reply = await this.evalConsume(
      policies.map((p) => p.key),
      args,
    );
    return policies.map((_, i) => {
      const k = 1 + i * REPLY_PER_POLICY;
      const retry = reply[k + 3]!;
      return {
        allowed: reply[k] === 1,
        remaining: reply[k + 1]!,
        resetMs: reply[k + 2]!,
        retryAfterMs: retry < 0 ? Infinity : retry,
      };
    });
  }

  async deleteByPrefix(keyPrefix: string): Promise<number> {
    const keys = this.client.isCluster
      ? await this.keysInSlot(this.client as Cluster, keyPrefix)
      : await this.scanKeys(this.client as Redis, keyPrefix);
    let deleted = 0;
    // All keys share one hash tag, so a multi-key UNLINK never crosses slots.
    for (let i = 0; i < keys.length; i += 500) {
      deleted += await this.client.unlink(...keys.slice(i, i + 500));
    }
    return deleted;
  }

  private async evalConsume(keys: string[], args: (string | number)[]): Promise<number[]> {
    if (args.length !== 1 + keys.length * ARGS_PER_POLICY) throw new Error('bad script arguments');
    try {
      return (await this.client.evalsha(CONSUME_SHA, keys.length, ...keys, ...args)) as number[];
    } catch (error) {
      if (!isNoScript(error)) throw error;
      // NOSCRIPT means the script did not run, so sending it in full cannot count twice.
      return (await this.client.eval(CONSUME_SCRIPT, keys.length, ...keys, ...args)) as number[];
    }
  }

  private async scanKeys(client: Redis, keyPrefix: string): Promise<string[]> {
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
  private async keysInSlot(cluster: Cluster, keyPrefix: string): Promise<string[]> {
    const slot = (await cluster.cluster('KEYSLOT', keyPrefix)) as number;
    const found = await Promise.all(
      cluster.nodes('master').map(async (node) => {
        const count = (await node.cluster('COUNTKEYSINSLOT', slot)) as number;
        return count > 0 ? ((await node.cluster('GETKEYSINSLOT', slot, count)) as string[]) : [];
      }),
    );
    return found.flat().filter((key) => key.startsWith(keyPrefix));
  }
}

/**
 * Splits policy indexes by the Cluster hash tag of their keys (the `{...}` part), in order;
 * policies of one identity share a tag, hence a slot.
 */
function groupByHashTag(policies: readonly StorePolicy[]): number[][] {
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

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}
