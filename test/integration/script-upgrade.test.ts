import { afterAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { RateLimiter, RedisStore, type Algorithm, type PolicyInput } from '../../lib/index.js';
import { ALGORITHMS } from '../../lib/core/model/policy.js';
import type { Spending } from '../../lib/core/limiter.js';
import { ALGORITHM_IMPLS } from '../../lib/core/algorithms/index.js';
import { CONSUME_SCRIPT, CONSUME_SHA } from '../../lib/core/stores/redis/lua/consume.js';
import { REFUND_SCRIPT, REFUND_SHA } from '../../lib/core/stores/redis/lua/refund.js';
import { MODES } from '../../lib/core/stores/redis/lua/protocol.js';
import { concurrencySuite } from '../conformance/concurrency.js';
import { penaltySuite } from '../conformance/penalties.js';
import { refundSuite } from '../conformance/refunds.js';
import { conformanceSuite } from '../conformance/suite.js';
import type { StoreKind } from '../conformance/stores.js';
import { newRedis } from '../harness/redis.js';

/**
 * The scripts' text changed (commit after bac346b: the Lua protocol as one table); their
 * meaning may not. The consume and refund scripts of bac346b are kept as fixtures. During a
 * rolling deploy both run against the same keys, so each must read what the other wrote and
 * decide alike.
 *
 * Two copies of the same history, one per Redis database: every call of the consume or refund
 * script runs on both, the old text on one and the new on the other, swapping at each call, so
 * each copy's state is written by both scripts in turn and read by the other. Every other
 * write (control hashes, releases, resets) goes to both. On a test clock both copies must
 * reply alike to every call; on the server clock, where two calls rarely see the same ms, the
 * states they leave must be the same: the same values (a debt's credit, a window's counts) and
 * the same expiries but for the ms between the two calls.
 */
const OLD: ReadonlyMap<string, string> = new Map([
  [CONSUME_SHA, readFileSync(new URL('../fixtures/bac346b-consume.lua', import.meta.url), 'utf8')],
  [REFUND_SHA, readFileSync(new URL('../fixtures/bac346b-refund.lua', import.meta.url), 'utf8')],
]);
const NEW: ReadonlyMap<string, string> = new Map([
  [CONSUME_SHA, CONSUME_SCRIPT],
  [REFUND_SHA, REFUND_SCRIPT],
]);
const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');

/**
 * The tags of the keys bac346b never writes: algorithms added since (its scripts cannot run
 * them: no rolling deploy from it has their policies) and state kept another way under a new
 * tag (the fixed window's count, `fwc`, where bac346b kept `"<count>:<end>"` under `fw`; the
 * sliding window's, packed or not, `swc`, where it kept `"<index>:<cur>:<prev>"` under `sw`),
 * so a call with such a key runs the current text on both.
 */
const NEWER_TAGS = (['sliding-log', 'fixed-window', 'sliding-window'] as const).map(
  (algorithm) => ALGORITHM_IMPLS[algorithm].tag,
);
const newer = (keys: readonly string[]) =>
  keys.some((key) => NEWER_TAGS.some((tag) => new RegExp(`:${tag}(:o\\d+)?$`).test(key)));

type Settled = { ok: true; value: unknown } | { ok: false; error: string };
const settle = (p: Promise<unknown>): Promise<Settled> =>
  p.then(
    (value) => ({ ok: true, value }),
    (error: unknown) => ({ ok: false, error: String(error) }),
  );

interface Twin {
  /** The client RedisStore is given: reads go to `b`; scripts and writes to both. */
  readonly client: Redis;
  /**
   * Calls of the consume or refund script so far. `raced`: a key of the call could expire in
   * Redis' own time between the two runs (see {@link twin}).
   */
  readonly calls: { sha: string; keys: string[]; old: Settled; current: Settled; raced: boolean }[];
  readonly a: Redis;
  readonly b: Redis;
  /**
   * The most ms that two twin calls of a script took, rounded up, plus 1 for Redis' whole-ms
   * clock: how far apart, at most, the server clocks they read were (measured, so it holds
   * however loaded the machine).
   */
  spreadMs: number;
}

/**
 * Two clients on two databases of the test Redis, as one. `b` answers; a call of the consume
 * or refund script runs the old text on one database and the new on the other, in turns.
 */
function twin(): Twin {
  const a = newRedis({ autoResendUnfulfilledCommands: false, db: 1 });
  const b = newRedis({ autoResendUnfulfilledCommands: false, db: 2 });
  const calls: Twin['calls'] = [];
  let turn = 0;
  const both =
    (name: 'evalsha' | 'eval' | 'unlink') =>
    async (...args: (string | number)[]): Promise<unknown> => {
      const sha = name === 'eval' ? sha1(String(args[0])) : String(args[0]);
      const numKeys = Number(args[1]);
      const callKeys = args.slice(2, 2 + numKeys).map(String);
      const old = name === 'unlink' || newer(callKeys) ? undefined : OLD.get(sha);
      if (old === undefined) {
        const [, fromB] = await Promise.all([
          (a[name] as (...x: unknown[]) => Promise<unknown>)(...args),
          (b[name] as (...x: unknown[]) => Promise<unknown>)(...args),
        ]);
        return fromB;
      }
      const rest = args.slice(2);
      const keys = rest.slice(0, numKeys).map(String);
      // Each policy key and its block. Redis expires keys on its own clock whatever the test
      // clock says, and some suites write TTLs of 1 or 2 ms (1000/s): such a key may lapse on
      // one copy and not the other between the two runs. Such a call is told apart (raced),
      // and the copies made alike again.
      const watched = keys.flatMap((key) => [key, `${key}:b`]);
      const sentAt = performance.now();
      const [ttlsA, ttlsB] = await Promise.all([pttls(a, watched), pttls(b, watched)]);
      const oldOnA = turn++ % 2 === 0;
      const oldRest = sha === CONSUME_SHA ? asCommit(rest, numKeys) : rest;
      const [onA, onB] = await Promise.all([
        settle(oldOnA ? a.eval(old, numKeys, ...oldRest) : a.eval(NEW.get(sha)!, numKeys, ...rest)),
        settle(oldOnA ? b.eval(NEW.get(sha)!, numKeys, ...rest) : b.eval(old, numKeys, ...oldRest)),
      ]);
      const tookMs = Math.ceil(performance.now() - sentAt) + 1;
      self.spreadMs = Math.max(self.spreadMs, tookMs);
      const lapses = (ttl: number) => ttl >= 0 && ttl <= tookMs;
      const raced = watched.some(
        (_, k) => lapses(ttlsA[k]!) || lapses(ttlsB[k]!) || ttlsA[k]! < 0 !== ttlsB[k]! < 0,
      );
      if (raced) await copyAcross(b, a, watched);
      calls.push({ sha, keys, old: oldOnA ? onA : onB, current: oldOnA ? onB : onA, raced });
      if (!onB.ok) throw new Error(onB.error);
      return onB.value;
    };
  const client = new Proxy(b, {
    get(target, prop, receiver) {
      if (prop === 'evalsha' || prop === 'eval' || prop === 'unlink') return both(prop);
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
    },
  });
  const self: Twin = { client, calls, a, b, spreadMs: 0 };
  return self;
}

/**
 * The consume script's arguments for bac346b: mode `m` (a spending that may be refunded),
 * which it reads as `d`, as `c`. Its fixed windows' ends aside (keys bac346b never runs, see
 * NEWER_TAGS), `m` commits and replies as `c` does; each instance sends its own text, so an
 * old one is never sent `m`.
 */
function asCommit(rest: readonly (string | number)[], numKeys: number): (string | number)[] {
  const mode = String(rest[numKeys]);
  if (!mode.startsWith(MODES.marked)) return [...rest];
  const out = [...rest];
  out[numKeys] = MODES.commit + mode.slice(1);
  return out;
}

async function pttls(c: Redis, keys: readonly string[]): Promise<number[]> {
  const replies = (await keys.reduce((p, key) => p.pttl(key), c.pipeline()).exec()) ?? [];
  return replies.map(([, ttl]) => ttl as number);
}

/** Makes `to`'s copy of `keys` what `from` holds, TTLs included. */
async function copyAcross(from: Redis, to: Redis, keys: readonly string[]): Promise<void> {
  for (const key of keys) {
    const [dump, ttl] = await Promise.all([from.dumpBuffer(key), from.pttl(key)]);
    await to.del(key);
    // -1: no TTL (restored without one); 0 or -2: gone, or going.
    if (dump && (ttl === -1 || ttl > 0)) await to.restore(key, Math.max(ttl, 0), dump);
  }
}

/** Both databases' copy of every key under `prefix`: value and absolute expiry (ms). */
async function copies(t: Twin, prefix: string) {
  const read = async (c: Redis) => {
    const keys = (await c.keys(`${prefix}*`)).sort();
    return Promise.all(
      keys.map(async (key) => {
        const type = await c.type(key);
        const value =
          type === 'string'
            ? await c.get(key)
            : type === 'zset'
              ? await c.zrange(key, '0', '-1', 'WITHSCORES')
              : await c.hgetall(key);
        return { key, value, expiresAt: Number(await c.call('PEXPIRETIME', key)) };
      }),
    );
  };
  return Promise.all([read(t.a), read(t.b)]);
}

describe('state written by the script of bac346b is read and decided alike by the current one', () => {
  const t = twin();
  // Each store watches its prefix's control index on a timer: stop them before the clients
  // go, or a read it sends as they close fails the suite ("Connection is closed", seen on a
  // loaded CI machine). A quit that finds the connection gone is no failure of this suite.
  const stores: RedisStore[] = [];
  const tracked = (store: RedisStore) => (stores.push(store), store);
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await Promise.all([t.a, t.b].map((c) => c.quit().catch(() => c.disconnect())));
  });
  const kind = (): StoreKind => ({
    name: 'Redis, old and new scripts in turns',
    expiresInRealTime: true,
    make: (clock) => ({
      store: tracked(new RedisStore({ client: t.client, clock })),
      pttl: (key) => t.b.pttl(key),
      raw: async (key) => (await t.b.get(key)) ?? undefined,
    }),
    close: () => Promise.resolve(),
  });

  // The conformance suites, every algorithm with its edge cases, penalties (all four block
  // letters), refunds, concurrency leases, overrides and exemptions, on a test clock.
  describe('conformance', () => conformanceSuite(kind));
  describe('penalties', () => penaltySuite(kind));
  describe('refunds', () => refundSuite(kind));
  describe('concurrency', () => concurrencySuite(kind));

  // Spendings and refunds in every order the suites do not try: refunds into the window
  // that spent, the one after, long after; of costs up to 3; stacked with a penalty.
  it.each(ALGORITHMS)('%s: random spendings and refunds', async (algorithm) => {
    let now = 1_800_000_000_000;
    const limiter = new RateLimiter({
      store: tracked(new RedisStore({ client: t.client, clock: () => now })),
      prefix: `ur${randomUUID().slice(0, 8)}`,
      timeoutMs: 5000,
    });
    const entries = [
      { identity: 'w', policy: { name: 'a', rate: '5/10s', algorithm } },
      { identity: 'w', policy: { name: 'b', rate: '7/13s', algorithm, block: 4000 } },
    ];
    let seed = 7;
    const random = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % n;
    const held: Spending[] = [];
    for (let i = 0; i < 300; i++) {
      now += [0, 1, 7, 450, 2999, 6500][random(6)]!;
      const { spending } = await limiter.spend(entries, { cost: 1 + random(3) });
      if (spending) held.push(spending);
      if (held.length > 0 && random(3) === 0) {
        await limiter.refund(held.splice(random(held.length), 1)[0]!, random(2) ? [0] : undefined);
      }
    }
  });

  it('the old and the new script replied alike to every one of those calls', () => {
    const consumes = t.calls.filter((c) => c.sha === CONSUME_SHA).length;
    const refunds = t.calls.filter((c) => c.sha === REFUND_SHA).length;
    // Enough calls of each script that every branch ran (the suites make them).
    expect(consumes).toBeGreaterThan(1000);
    expect(refunds).toBeGreaterThan(10);
    const differed = t.calls.filter(
      (c) => !c.raced && JSON.stringify(c.old) !== JSON.stringify(c.current),
    );
    expect(differed).toEqual([]);
    // The calls a key's own expiry may have raced are few (the 1000/s policies).
    expect(t.calls.filter((c) => c.raced).length).toBeLessThan(t.calls.length / 10);
    // Both scripts answered, errors included: no call failed on either.
    expect(t.calls.filter((c) => !c.old.ok || !c.current.ok)).toEqual([]);
  });

  it.each([
    ['token-bucket', '1000/h', 40],
    ['gcra', '1000/h', undefined],
    // A whole number of ms per unit: only the expiry moves, the value stays (PEXPIRE).
    ['gcra', '100/100s', 20],
    // An emission interval of 514285.71 ms: the value holds the sub-ms credit.
    ['gcra', '7/h', 5],
  ] as [Algorithm, string, number | undefined][])(
    'on the server clock, %s %s (burst %s): the same states, stacked with a penalty',
    async (algorithm, rate, burst) => {
      const prefix = `up${randomUUID().slice(0, 8)}`;
      const limiter = new RateLimiter({
        store: tracked(new RedisStore({ client: t.client })),
        prefix,
        timeoutMs: 5000,
      });
      const policy: PolicyInput = { name: 'rate', rate, algorithm, burst };
      const penalised: PolicyInput = {
        name: 'small',
        rate: '3/h',
        algorithm,
        block: 3_600_000,
        extendBlock: true,
      };
      for (let i = 0; i < 12; i++) {
        const cost = i % 4 === 3 ? 2 : 1;
        await limiter.consumeEach([
          { identity: 'u', policy, cost },
          { identity: 'u', policy: penalised },
        ]);
        await limiter.consume('v', policy, { cost });
        const [onA, onB] = await copies(t, prefix);
        expect(onA.map(({ key, value }) => [key, value])).toEqual(
          onB.map(({ key, value }) => [key, value]),
        );
        onA.forEach(({ expiresAt }, k) => {
          expect(Math.abs(expiresAt - onB[k]!.expiresAt)).toBeLessThanOrEqual(t.spreadMs);
        });
      }
      const [onA] = await copies(t, prefix);
      // The penalty started and every policy wrote: the comparison compared something.
      expect(onA.map((k) => k.key.split(':').pop())).toEqual(
        expect.arrayContaining([algorithm === 'gcra' ? 'gcra' : 'tb', 'b']),
      );
    },
  );
});
