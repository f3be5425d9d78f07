import type { Cluster, Redis } from 'ioredis';
import { ALGORITHM_IMPLS, decideAll, type State } from '../algorithms/index.js';
import { blockedOutcome, startsBlock } from '../penalty.js';
import { markOf, owedTicks, type StoreRefund } from '../refund.js';
import { REFUND_SCRIPT, REFUND_SHA } from './redis-refund-script.js';
import { RELEASE_SCRIPT, RELEASE_SHA } from './redis-lease-script.js';
import type { Lease } from '../concurrency.js';
import { isControlKey } from '../keys.js';
import { CONTROL_SCRIPT, CONTROL_SHA, INSPECT_SCRIPT, INSPECT_SHA } from './redis-admin-scripts.js';
import { snapshotOf, type InspectReply } from './redis-inspect.js';
import {
  findKeys,
  groupByHashTag,
  isNoScript,
  pairsToRecord,
  warnIfReplaying,
} from './redis-client.js';
import { ARGS_PER_POLICY, CONSUME_SCRIPT, CONSUME_SHA } from './redis-script.js';
import type {
  ControlChange,
  ControlSnapshot,
  RateLimitStore,
  StoreOutcome,
  StorePolicy,
  StoreSnapshot,
} from './store.js';

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * An ioredis client: `Redis` (standalone, or Sentinel through its options) or `Cluster`.
   * The store never closes it. Configure it never to re-send a command whose reply was
   * lost (`autoResendUnfulfilledCommands: false`; on Cluster also `retryDelayOnFailover: 0`
   * and the same in `redisOptions`), or one request may count twice: the store warns
   * otherwise. To fail fast rather than queue while disconnected, also
   * `enableOfflineQueue: false` and `maxRetriesPerRequest: 0`.
   */
  client: Redis | Cluster;
  /**
   * **Tests only.** Replaces the Redis server clock with this one, in ms since the
   * epoch. In production every instance must share the Redis clock, so leave it unset.
   */
  clock?: () => number;
}

/**
 * Rate-limit state in Redis: one Lua script call per request evaluates every policy of
 * the request atomically (DESIGN §4). Time comes from the Redis server clock, so
 * instances with skewed clocks still agree.
 *
 * The script is sent by EVALSHA; only when Redis answers `NOSCRIPT` (after a restart,
 * failover or `SCRIPT FLUSH`) is it sent again with EVAL. Nothing else is retried.
 */
export class RedisStore implements RateLimitStore {
  private readonly client: Redis | Cluster;
  private readonly clock: (() => number) | undefined;

  /** Emits a `NRL_UNSAFE_REDIS_CLIENT` warning for a client that may replay a script (see `replaySettings`). */
  constructor(options: RedisStoreOptions) {
    this.client = options.client;
    this.clock = options.clock;
    warnIfReplaying(options.client);
  }

  consume(policies: readonly StorePolicy[]): Promise<StoreOutcome[]> {
    const groups = this.client.isCluster ? groupByHashTag(policies) : [];
    if (groups.length <= 1) return this.consumeOne(policies, 'c');
    return this.consumeAcross(policies, groups);
  }

  private async consumeAcross(
    policies: readonly StorePolicy[],
    groups: number[][],
  ): Promise<StoreOutcome[]> {
    // Keys of different identities may live on different Cluster nodes, out of reach of
    // one script. Decide every identity first, writing nothing; commit only if all admit.
    // (Between the two steps another request may spend the same budget; then a commit can
    // still deny after an earlier one was written: the only case where a denied request
    // spends something.)
    const run = async (commit: boolean) => {
      const outcomes: StoreOutcome[] = new Array(policies.length);
      for (const group of groups) {
        const result = await this.consumeOne(
          group.map((i) => policies[i]!),
          commit ? 'c' : 'd',
        );
        group.forEach((i, k) => (outcomes[i] = result[k]!));
      }
      return outcomes;
    };
    const decided = await run(false);
    if (decided.every((o) => o.allowed)) return run(true);
    // A refusal under a policy with a penalty starts its block: its identity is asked again,
    // in a mode that writes only blocks.
    for (const group of groups) {
      if (!group.some((i) => !decided[i]!.allowed && policies[i]!.blockMs !== undefined)) continue;
      const result = await this.consumeOne(
        group.map((i) => policies[i]!),
        'b',
      );
      group.forEach((i, k) => (decided[i] = result[k]!));
    }
    return decided;
  }

  /** @param mode `c` commit, `d` decide only, `b` decide and write penalties (see CONSUME_SCRIPT) */
  private consumeOne(
    policies: readonly StorePolicy[],
    mode: 'c' | 'd' | 'b',
  ): Promise<StoreOutcome[]> {
    const args: (string | number)[] = [this.clock ? `${mode}${this.clock()}` : mode];
    for (const p of policies) {
      const code = ALGORITHM_IMPLS[p.algorithm].code;
      args.push(
        p.lease !== undefined
          ? `${code}:${p.lease}`
          : p.blockMs === undefined
            ? code
            : `${code}${p.extendBlock ? 'B' : 'b'}${p.blockMs}`,
        p.limit,
        p.periodMs,
        p.capacity,
        p.cost,
      );
    }
    return this.evalConsume(
      policies.map((p) => p.key),
      args,
    ).then((reply) => this.outcomesOf(policies, mode, reply));
  }

  /** The outcomes of one script call, from its reply (see CONSUME_SCRIPT). */
  private outcomesOf(
    policies: readonly StorePolicy[],
    mode: 'c' | 'd' | 'b',
    reply: ScriptReply,
  ): StoreOutcome[] {
    // The script returns each state as it stood; the TypeScript reference turns it into the
    // numbers reported, deciding exactly as the script did (test/integration/lua-reference).
    const values = typeof reply === 'number' ? [reply] : reply;
    let r = 0;
    const evaluations = policies.map((policy) => {
      const impl = ALGORITHM_IMPLS[policy.algorithm];
      if (policy.algorithm === 'concurrency') {
        // Leases held, and ms until the last expires: read at time 0 (see concurrency.ts).
        const state: State = [values[r++] as number, values[r++] as number];
        return { impl, params: policy, now: 0, state, debt: undefined };
      }
      if (!impl.decode) {
        // A debt in ticks, as a GCRA state read at time 0.
        const debt = values[r++] as number;
        const state: State = [Math.floor(debt / policy.limit), debt % policy.limit];
        return { impl, params: policy, now: 0, state, debt };
      }
      const raw = values[r++] as string | null;
      const now = values[r++] as number;
      const state = raw === null ? undefined : impl.decode(raw);
      return { impl, params: policy, now, state, debt: undefined };
    });
    // Overrides and exemptions the script applied, if any (see CONSUME_SCRIPT).
    const effects = values.length > r ? (values.slice(r) as string[]) : undefined;
    const controlled = effects
      ? evaluations.map((e, i) => {
          const effect = effects[i] ?? '';
          if (effect === '' || effect.startsWith('b')) return e;
          const params = effect === 'x' ? { ...e.params, cost: 0 } : overridden(e.params, effect);
          const state =
            e.debt === undefined
              ? e.state
              : ([Math.floor(e.debt / params.limit), e.debt % params.limit] as State);
          return { ...e, params, state };
        })
      : evaluations;
    // Blocks in force, with their ms left (see penalty.ts).
    const blocks = effects?.map((e) => (e.startsWith('b') ? Number(e.slice(1)) : undefined));
    return decideAll(controlled, blocks).map((o, i) => {
      const { allowed, remaining, resetMs, retryAfterMs } = o;
      const outcome: StoreOutcome = { allowed, remaining, resetMs, retryAfterMs };
      const effect = effects?.[i] ?? '';
      const policy = policies[i]!;
      if (blocks?.[i] !== undefined) return { ...outcome, blocked: true };
      if (mode !== 'd' && startsBlock(policy, o, undefined, effect !== '')) {
        return { ...blockedOutcome(o, policy.blockMs!), blocked: true };
      }
      if (effect === '') {
        // Only for a spending the caller may refund (RateLimiter.spend): others pay nothing.
        if (!policy.refundable || !o.state) return outcome;
        // Token bucket and GCRA are read at time 0 (a debt): their TAT counts from now.
        const offset = this.clock?.() ?? Date.now();
        return { ...outcome, mark: markOf(policy.algorithm, o.state, offset) };
      }
      if (effect === 'x') return { ...outcome, exempt: true };
      const { limit, periodMs } = controlled[i]!.params;
      return { ...outcome, override: { limit, periodMs } };
    });
  }

  /** One script call per identity (hash tag); see REFUND_SCRIPT. */
  async refund(refunds: readonly StoreRefund[]): Promise<number> {
    let given = 0;
    for (const group of groupByHashTag(refunds)) {
      const keys: string[] = [];
      const now = this.clock?.();
      const args: (string | number)[] = [now ?? ''];
      for (const i of group) {
        const r = refunds[i]!;
        const code = ALGORITHM_IMPLS[r.algorithm].code;
        // Token bucket and GCRA give back what is still owed, in ticks (see owedTicks).
        const amount = code > 2 ? owedTicks(r, now ?? Date.now()) : r.cost;
        if (amount === 0) continue;
        keys.push(r.key);
        args.push(code, r.limit, r.periodMs, amount, r.mark);
      }
      if (keys.length === 0) continue;
      given += (await this.evalScript(REFUND_SCRIPT, REFUND_SHA, keys, args)) as number;
    }
    return given;
  }

  /** One script call per identity (hash tag); see RELEASE_SCRIPT. */
  async release(leases: readonly Lease[]): Promise<number> {
    let freed = 0;
    for (const group of groupByHashTag(leases)) {
      const keys = group.map((i) => leases[i]!.key);
      const ids = group.map((i) => leases[i]!.id);
      freed += (await this.evalScript(RELEASE_SCRIPT, RELEASE_SHA, keys, ids)) as number;
    }
    return freed;
  }

  async deleteByPrefix(keyPrefix: string): Promise<number> {
    // Overrides and exemptions outlive a reset.
    const keys = (await findKeys(this.client, keyPrefix)).filter((key) => !isControlKey(key));
    let deleted = 0;
    if (this.client.isCluster) {
      // One key per command: a single-key UNLINK follows ASK redirects while its slot
      // migrates, where a multi-key one would get TRYAGAIN.
      for (const key of keys) deleted += await this.client.unlink(key);
    } else {
      for (let i = 0; i < keys.length; i += 500)
        deleted += await this.client.unlink(...keys.slice(i, i + 500));
    }
    return deleted;
  }

  /**
   * Finds the keys like {@link RedisStore.deleteByPrefix} (SCAN on standalone; on Cluster
   * only the identity's slot, on the master that owns it), then reads them all with `TIME`
   * in one script call, so every state is seen at the same instant.
   */
  async inspect(keyPrefix: string): Promise<StoreSnapshot> {
    const keys = await findKeys(this.client, keyPrefix);
    const reply = (await this.evalScript(INSPECT_SCRIPT, INSPECT_SHA, keys, [
      this.clock ? this.clock() : '',
    ])) as InspectReply;
    return snapshotOf(keys, reply, this.clock !== undefined);
  }

  async control(key: string, change: ControlChange): Promise<ControlSnapshot> {
    const args: (string | number)[] =
      change.op === 'set'
        ? ['s', '', change.field, change.value ?? '', change.ttlMs, change.reason]
        : change.op === 'remove'
          ? ['d', '', change.field, '', 0, '']
          : ['g', '', '', '', 0, ''];
    if (this.clock) args[1] = this.clock();
    const [nowMs, pairs, removed] = (await this.evalScript(
      CONTROL_SCRIPT,
      CONTROL_SHA,
      [key],
      args,
    )) as [number, string[], number];
    return {
      nowMs,
      fields: pairsToRecord(pairs),
      ...(change.op === 'remove' && { removed: removed > 0 }),
    };
  }

  private async evalScript(
    script: string,
    sha: string,
    keys: string[],
    args: (string | number)[],
  ): Promise<unknown> {
    try {
      return await this.client.evalsha(sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return await this.client.eval(script, keys.length, ...keys, ...args);
    }
  }

  private evalConsume(keys: string[], args: (string | number)[]): Promise<ScriptReply> {
    if (args.length !== 1 + keys.length * ARGS_PER_POLICY) {
      return Promise.reject(new Error('bad script arguments'));
    }
    const n = keys.length;
    const call = this.client.evalsha(CONSUME_SHA, n, ...keys, ...args) as Promise<ScriptReply>;
    return call.catch((error: unknown) => {
      if (!isNoScript(error)) throw error;
      // NOSCRIPT means the script did not run, so sending it in full cannot count twice.
      return this.client.eval(CONSUME_SCRIPT, n, ...keys, ...args) as Promise<ScriptReply>;
    });
  }
}

/** A policy's parameters under an override reported as `"<limit>:<periodMs>:<capacity>"`. */
function overridden(params: StorePolicy, effect: string): StorePolicy {
  const [limit, periodMs, capacity] = effect.split(':').map(Number);
  return { ...params, limit: limit!, periodMs: periodMs!, capacity: capacity! };
}

/** See {@link CONSUME_SCRIPT}: a debt alone, or states as they stood. */
type ScriptReply = number | (number | string | null)[];
