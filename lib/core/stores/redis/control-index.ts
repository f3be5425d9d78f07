import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { CONTROL_SUFFIX } from '../../model/store-keys.js';
import { evalScript } from './scripting.js';

/**
 * How long an index entry outlives the controls it stands for, in ms: the index is written
 * in a script call of its own, a moment before the control hash, so its end is computed on
 * a slightly earlier clock. An entry that lingers only makes a request read an empty hash.
 */
const INDEX_MARGIN_MS = 1000;

/**
 * Changes the index of controlled identities of one key prefix: which control hashes (see
 * `controlKey`) may hold an override or an exemption, so that requests of every other
 * identity skip reading theirs. Readers use plain `GET` and `ZRANGE` (see
 * {@link ControlIndex}): a script call would count as a request's in `INFO commandstats`.
 *
 * KEYS[1]: the sorted set `<prefix>:{ctl index}` (member: a control key; score: the latest
 * end of its entries, ms on the server clock, plus a margin); KEYS[2]: its version,
 * `<prefix>:{ctl index}:v`, a counter bumped by every change. The space in the hash tag keeps
 * both out of every identity's keys (`identityTag` never gives one), and both share a slot.
 * ARGV[1]: `a` (add) or `r` (remove); ARGV[2]: `''` for the server clock, or a test clock's
 * ms; ARGV[3]: the control key; ARGV[4]: for `a`, its entry's ttlMs. A removal (`r`) only
 * moves the version: its member stays until its score passes. Taking it out would race a
 * `set` of another instance (index first, hash second) between this one's hash change and
 * its index change, and hide that new entry from every instance.
 *
 * Members whose score is not after now go first. A version that does not exist yet is
 * seeded with the server time in µs, so a version that expired and came back never repeats
 * an old one (readers compare versions only for equality). Both keys live as long as the
 * longest entry, plus the margin.
 */
export const INDEX_SCRIPT = `
local zk, vk, op, member = KEYS[1], KEYS[2], ARGV[1], ARGV[3]
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
redis.call('ZREMRANGEBYSCORE', zk, '-inf', string.format('%d', now))
local ttl
if op == 'a' then
  ttl = tonumber(ARGV[4]) + ${INDEX_MARGIN_MS}
  local score = redis.call('ZSCORE', zk, member)
  -- The later end wins (ZADD GT, by hand: Redis 6.0 has no GT).
  if not score or tonumber(score) < now + ttl then
    redis.call('ZADD', zk, string.format('%d', now + ttl), member)
  end
end
if redis.call('EXISTS', vk) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', vk, string.format('%d', t[1] * 1000000 + t[2]), 'PX', ttl or 2147483647)
end
redis.call('INCR', vk)
if ttl then
  for _, k in ipairs({ zk, vk }) do
    if redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
  end
end
return 1
`;

/** SHA-1 of {@link INDEX_SCRIPT}, as EVALSHA wants it. */
const INDEX_SHA = createHash('sha1').update(INDEX_SCRIPT).digest('hex');

/** Called with the identity key prefixes (`<prefix>:{<tag>}:`) whose controls may have changed. */
export type ControlsChanged = (identityPrefixes: readonly string[]) => void;

interface PrefixIndex {
  /** The version last read; `'-'` (never a version) until the first read. */
  version: string;
  /** Control key -> its index score (ms on the server clock; Infinity for this process's own, until read). */
  members: Map<string, number>;
  readonly listeners: ControlsChanged[];
}

/**
 * A RedisStore's local copy of the index of controlled identities (see
 * {@link INDEX_SCRIPT}), one per key prefix that a RateLimiter on the store uses, refreshed
 * every `refreshMs` by an unref'd timer (never on the request path). Changes this process
 * makes are applied to it at once.
 */
export class ControlIndex {
  /** Every control key that may hold controls, over all prefixes. */
  keys: ReadonlySet<string> = new Set();
  /**
   * True while requests must read every identity's control hash: the index is off
   * (`refreshMs` 0), no prefix is known yet, or some prefix's index was never read.
   */
  all = true;
  private readonly prefixes = new Map<string, PrefixIndex>();
  private timer: ReturnType<typeof setInterval> | undefined;
  /** The last refresh asked for: refreshes run one after the other. */
  private last: Promise<void> = Promise.resolve();
  private busy = false;
  /** Counts this process's own changes, so a refresh read before one never undoes it. */
  private changes = 0;
  private closed = false;

  constructor(
    private readonly client: Redis | Cluster,
    /** **ms** between refreshes; 0: no index, read every control hash. */
    private readonly refreshMs: number,
    private readonly clock: (() => number) | undefined,
  ) {}

  /** Starts keeping the index of `prefix`, and calls `listener` when its entries change. */
  watch(prefix: string, listener?: ControlsChanged): void {
    if (this.refreshMs === 0 || this.closed) return;
    const index = this.indexOf(prefix);
    if (listener) index.listeners.push(listener);
    if (this.timer === undefined) {
      this.timer = setInterval(() => {
        // A client its owner closed: nothing to refresh any more.
        // Only on a ready client: a command would connect a lazy one, and should not race a
        // quit. A client its owner closed has nothing more to read.
        if (this.client.status === 'end') this.close();
        else if (this.client.status === 'ready' && !this.busy) {
          this.busy = true;
          void this.refresh().finally(() => (this.busy = false));
        }
      }, this.refreshMs);
      this.timer.unref();
    }
    if (this.client.status !== 'wait') void this.refresh();
  }

  /**
   * Reads the index of every watched prefix (one script call each), after any read under
   * way. Never throws: on a failure the last copy stays.
   */
  refresh(): Promise<void> {
    return (this.last = this.last.then(() => this.readAll()).catch(() => undefined));
  }

  /** Stops the timer. */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
  }

  /**
   * Writes the index before a control hash changes: `set` adds (or lengthens) `controlKey`'s
   * entry for `ttlMs`; `remove` only moves the version (the member stays until it ends: see
   * INDEX_SCRIPT).
   * @throws what the client throws: the caller must not write the hash then
   */
  async write(
    controlKey: string,
    change: { op: 'set'; ttlMs: number } | { op: 'remove'; empty: boolean },
  ): Promise<void> {
    const args =
      change.op === 'set'
        ? ['a', this.clock?.() ?? '', controlKey, change.ttlMs]
        : ['r', this.clock?.() ?? '', controlKey, change.empty ? '1' : '0'];
    await evalScript(this.client, INDEX_SCRIPT, INDEX_SHA, indexKeys(prefixOf(controlKey)), args);
    this.changes++;
    const index = this.prefixes.get(prefixOf(controlKey));
    if (change.op === 'set') {
      // Seen by this process's next decision, watched prefix or not.
      (index ?? this.indexOf(prefixOf(controlKey))).members.set(controlKey, Infinity);
    }
    // A removal keeps the member (see INDEX_SCRIPT): requests read an empty hash until it ends.
    this.update();
  }

  private indexOf(prefix: string): PrefixIndex {
    let index = this.prefixes.get(prefix);
    if (!index) {
      this.prefixes.set(prefix, (index = { version: '-', members: new Map(), listeners: [] }));
      this.update();
    }
    return index;
  }

  /**
   * Per prefix: `GET` of the version; when it moved, `ZRANGE` of the members with their
   * scores; when a member may have ended, `TIME`. Plain commands, no script: tests and
   * operators count script calls as requests.
   */
  private async readAll(): Promise<void> {
    for (const [prefix, index] of this.prefixes) {
      const at = this.changes;
      const [zk, vk] = indexKeys(prefix);
      let version: string;
      let read: string[] | undefined;
      let now: number;
      try {
        version = (await this.client.get(vk)) ?? '';
        if (version !== index.version) read = await this.client.zrange(zk, '0', '-1', 'WITHSCORES');
        now = this.clock?.() ?? (await this.serverNow(read ?? index.members));
      } catch {
        // The breaker and backend_error logging report a Redis that is down; the last copy
        // stays (before any read: every control hash is read).
        continue;
      }
      // A change of this process's own came in meanwhile: the reply may predate it, so keep
      // the copy (with its change) and read again next time.
      if (this.changes !== at) continue;
      const members = read ? new Map<string, number>() : new Map(index.members);
      if (read) {
        for (let i = 0; i + 1 < read.length; i += 2) members.set(read[i]!, Number(read[i + 1]));
      }
      // Entries that ended (the writers drop them from Redis at their next change).
      for (const [key, score] of members) if (score <= now) members.delete(key);
      index.version = version;
      if (!read && members.size === index.members.size) continue;
      const before = index.members;
      index.members = members;
      this.update();
      // Denials remembered under the old controls may not hold any more (a new exemption):
      // every controlled identity, before and after, as changes are rare and few.
      const touched = new Set([...before.keys(), ...members.keys()]);
      if (touched.size > 0 && index.listeners.length > 0) {
        const identities = [...touched].map((k) => k.slice(0, -CONTROL_SUFFIX.length));
        for (const listener of index.listeners) listener(identities);
      }
    }
  }

  /** The server's time in ms, asked only when some entry has a score to compare. */
  private async serverNow(
    members: readonly string[] | ReadonlyMap<string, number>,
  ): Promise<number> {
    const any = Array.isArray(members)
      ? members.length > 0
      : (members as ReadonlyMap<string, number>).size > 0;
    if (!any) return 0;
    const [seconds, micros] = await this.client.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  /** Rebuilds {@link keys} and {@link all} from the prefixes. */
  private update(): void {
    const keys = new Set<string>();
    let all = this.refreshMs === 0 || this.prefixes.size === 0;
    for (const index of this.prefixes.values()) {
      if (index.version === '-') all = true;
      for (const key of index.members.keys()) keys.add(key);
    }
    this.keys = keys;
    this.all = all;
  }
}

/** The key prefix of a control key (`<prefix>:{<tag>}:ctl`): prefixes hold no `{`. */
function prefixOf(controlKey: string): string {
  return controlKey.slice(0, controlKey.indexOf(':{'));
}

/** KEYS of {@link INDEX_SCRIPT} for one key prefix. */
function indexKeys(prefix: string): [string, string] {
  return [`${prefix}:{ctl index}`, `${prefix}:{ctl index}:v`];
}
