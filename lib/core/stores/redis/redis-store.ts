import type { Cluster, Redis } from 'ioredis';
import type { StoreRefund } from '../../model/refund.js';
import { REFUND_SCRIPT, REFUND_SHA } from './lua/refund.js';
import { RELEASE_SCRIPT, RELEASE_SHA } from './lua/lease.js';
import type { Lease } from '../../algorithms/concurrency.js';
import { quote, RateLimitConfigError } from '../../errors.js';
import { controlKeyOf, isControlKey } from '../../model/store-keys.js';
import { CONTROL_SCRIPT, CONTROL_SHA, INSPECT_SCRIPT, INSPECT_SHA } from './lua/admin.js';
import { snapshotOf, type InspectReply } from './inspect.js';
import {
  evalScript,
  findKeys,
  groupByHashTag,
  isNoScript,
  pairsToRecord,
  warnIfReplaying,
} from './scripting.js';
import { ControlIndex, type ControlsChanged } from './control-index.js';
import { ClientReadiness } from './readiness.js';
import type { RedisStoreOptions } from './options.js';
import { outcomesOf, type ScriptReply } from './reply.js';
import { CONSUME_SCRIPT, CONSUME_SHA } from './lua/consume.js';
import { commitMode, MODES, pushPolicy, pushRefund, type Mode } from './lua/protocol.js';
import type {
  ControlChange,
  ControlSnapshot,
  RateLimitStore,
  StoreOutcome,
  StorePolicy,
  StoreSnapshot,
} from '../store.js';

/**
 * Rate-limit state in Redis: one Lua script call per request evaluates every policy of
 * the request atomically, all-or-nothing. Time comes from the Redis server clock, so
 * instances with skewed clocks still agree.
 *
 * The script is sent by EVALSHA; only when Redis answers `NOSCRIPT` (after a restart,
 * failover or `SCRIPT FLUSH`) is it sent again with EVAL. Nothing else is retried.
 */
export type { RedisStoreOptions } from './options.js';

export class RedisStore implements RateLimitStore {
  private readonly client: Redis | Cluster;
  private readonly clock: (() => number) | undefined;
  private readonly index: ControlIndex;
  private readonly readiness: ClientReadiness;

  /**
   * Emits a `NRL_UNSAFE_REDIS_CLIENT` warning for a client that may replay a script (see
   * `replaySettings`), unless `acceptReplays` is true.
   * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_OPTION` for a bad `controlRefreshMs` or `connectTimeoutMs`
   */
  constructor(options: RedisStoreOptions) {
    const { controlRefreshMs = 1000, connectTimeoutMs = 1000 } = options;
    if (
      controlRefreshMs !== false &&
      !(
        Number.isSafeInteger(controlRefreshMs) &&
        controlRefreshMs >= 0 &&
        controlRefreshMs <= 2 ** 31 - 1
      )
    ) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_STORE_OPTION',
        `invalid controlRefreshMs ${quote(controlRefreshMs)}: expected an integer number of ms from 0 to 2^31-1, or false`,
        'RedisStore',
      );
    }
    this.client = options.client;
    this.clock = options.clock;
    this.index = new ControlIndex(options.client, controlRefreshMs || 0, options.clock);
    this.readiness = new ClientReadiness(options.client, connectTimeoutMs);
    if (options.acceptReplays !== true) warnIfReplaying(options.client);
  }

  /** See `RateLimitStore.ready` and `ClientReadiness`. */
  ready(): Promise<void> | undefined {
    return this.readiness.check();
  }

  /**
   * Keeps the index of controlled identities under key prefix `prefix` (each `RateLimiter`
   * calls it for its own), refreshing it every `controlRefreshMs` from now on; `changed` hears
   * of the identities whose controls may have changed on another instance.
   */
  watchControls(prefix: string, changed?: ControlsChanged): void {
    this.index.watch(prefix, changed);
  }

  /**
   * Reads the index of controlled identities now, as the timer does every
   * `controlRefreshMs`. Never throws: on a failure the last copy stays.
   */
  refreshControls(): Promise<void> {
    return this.index.refresh();
  }

  /** Stops refreshing the index. Never closes the client. */
  close(): Promise<void> {
    this.index.close();
    return Promise.resolve();
  }

  consume(policies: readonly StorePolicy[]): Promise<StoreOutcome[]> {
    const groups = this.client.isCluster ? groupByHashTag(policies) : [];
    if (groups.length <= 1) return this.consumeOne(policies, commitMode(policies));
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
        const members = group.map((i) => policies[i]!);
        const result = await this.consumeOne(members, commit ? commitMode(members) : MODES.decide);
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
        MODES.penalties,
      );
      group.forEach((i, k) => (decided[i] = result[k]!));
    }
    return decided;
  }

  /** @param mode see `MODES` (protocol.ts) */
  private consumeOne(policies: readonly StorePolicy[], mode: Mode): Promise<StoreOutcome[]> {
    const args: (string | number)[] = [this.clock ? `${mode}${this.clock()}` : mode];
    // The script reads the control hash of the identities the index lists (see CONSUME_SCRIPT).
    const { all, keys: ctl } = this.index;
    for (const p of policies) {
      pushPolicy(args, p, all || (ctl.size !== 0 && ctl.has(controlKeyOf(p.key))));
    }
    return this.evalConsume(
      policies.map((p) => p.key),
      args,
      (reply) => outcomesOf(policies, reply, mode, this.clock),
    );
  }

  /** One script call per identity (hash tag); see REFUND_SCRIPT. */
  async refund(refunds: readonly StoreRefund[]): Promise<number> {
    let given = 0;
    for (const group of groupByHashTag(refunds)) {
      const keys: string[] = [];
      const now = this.clock?.();
      const args: (string | number)[] = [now ?? ''];
      for (const i of group) {
        if (pushRefund(args, refunds[i]!, now)) keys.push(refunds[i]!.key);
      }
      if (keys.length === 0) continue;
      given += (await evalScript(this.client, REFUND_SCRIPT, REFUND_SHA, keys, args)) as number;
    }
    return given;
  }

  /**
   * One script call per identity (hash tag), all sent at once (see RELEASE_SCRIPT): the
   * releases kept during an outage span many identities, and one after the other they took a
   * round trip each within one `timeoutMs` (100 identities took 35 ms locally).
   */
  async release(leases: readonly Lease[]): Promise<number> {
    const freed = await Promise.all(
      groupByHashTag(leases).map((group) =>
        evalScript(
          this.client,
          RELEASE_SCRIPT,
          RELEASE_SHA,
          group.map((i) => leases[i]!.key),
          group.map((i) => leases[i]!.id),
        ),
      ),
    );
    return freed.reduce((sum: number, n) => sum + (n as number), 0);
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
    const reply = (await evalScript(this.client, INSPECT_SCRIPT, INSPECT_SHA, keys, [
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
    // The index first: another instance that reads it before the hash is written reads an
    // empty hash, where the other order could let it skip a hash already written.
    if (change.op === 'set') await this.index.write(key, { op: 'set', ttlMs: change.ttlMs });
    const [nowMs, pairs, removed] = (await evalScript(
      this.client,
      CONTROL_SCRIPT,
      CONTROL_SHA,
      [key],
      args,
    )) as [number, string[], number];
    if (change.op === 'remove' && removed > 0) {
      const empty = !pairs.some((field, i) => i % 2 === 0 && !field.startsWith('r:'));
      await this.index.write(key, { op: 'remove', empty });
    }
    return {
      nowMs,
      fields: pairsToRecord(pairs),
      ...(change.op === 'remove' && { removed: removed > 0 }),
    };
  }

  /** The consume script's reply, read by `decode` (in the same turn: no extra promise per call). */
  private evalConsume<T>(
    keys: string[],
    args: (string | number)[],
    decode: (reply: ScriptReply) => T,
  ): Promise<T> {
    const n = keys.length;
    const call = this.client.evalsha(CONSUME_SHA, n, ...keys, ...args) as Promise<ScriptReply>;
    return call.then(decode, (error: unknown) => {
      if (!isNoScript(error)) throw error;
      // NOSCRIPT means the script did not run, so sending it in full cannot count twice.
      return (this.client.eval(CONSUME_SCRIPT, n, ...keys, ...args) as Promise<ScriptReply>).then(
        decode,
      );
    });
  }
}
