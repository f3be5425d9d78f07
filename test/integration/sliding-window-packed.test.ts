/**
 * The sliding window's packed form on the Redis server clock (see `PACKED_BASE` in
 * sliding-window.ts): the counts `prev · 10^7 + cur` in the value, the window in the key's
 * expiry, `(index + 2) · P`. Time is not waited for: a state is written with the expiry that
 * puts "now" where the test wants it in the key's window (PXAT), as elapsed time would; the
 * few ms that pass during a call only move it further, so bounds are one-sided and tight.
 * A private server, whose command counts are this file's alone.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { RateLimiter, RedisStore } from '../../lib/index.js';
import { PACKED_BASE, PACKED_INDEX_MOD } from '../../lib/core/algorithms/sliding-window.js';
import { policyKey } from '../../lib/core/model/store-keys.js';
import { commandCalls, startRedisServer, type RedisServerHandle } from '../harness/redis.js';

const HOUR = 3_600_000;
const policy = { rate: '5/h', algorithm: 'sliding-window' } as const;

describe('the sliding window packed on the server clock', () => {
  let server: RedisServerHandle;
  let admin: Redis;
  let client: Redis;
  let n = 0;
  const stores: RedisStore[] = [];

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
    client = new Redis(server.url, { autoResendUnfulfilledCommands: false });
    await client.ping();
  });

  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    admin.disconnect();
    client.disconnect();
    await server.stop();
  });

  /**
   * A limiter whose store has read its index of controlled identities (none): until then a
   * store reads every identity's control hash, on the script's general loop.
   */
  async function setup() {
    const prefix = `pk${n++}`;
    const store = new RedisStore({ client });
    stores.push(store);
    const limiter = new RateLimiter({ store, prefix, timeoutMs: 5000 });
    await store.refreshControls();
    const key = (name = 'default') => policyKey(prefix, 'u', 'global', name, 'swc');
    return { limiter, store, key, prefix };
  }
  const redisNow = async () => {
    const [s, us] = await admin.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };
  /** A window's packed value (see PACKED_BASE): its index's digits, then the counts. */
  const packed = (cur: number, prev: number, index: number) =>
    String(((index % PACKED_INDEX_MOD) * PACKED_BASE + prev) * PACKED_BASE + cur);
  /**
   * Writes the packed state expiring at `atMs` (ms since the epoch), of the window whose end
   * is nearest a period before (or of window `index`).
   */
  const pack = (key: string, cur: number, prev: number, atMs: number, index?: number) =>
    admin.set(key, packed(cur, prev, index ?? Math.round(atMs / HOUR) - 2), 'PXAT', atMs);

  it('a lone policy keeps its counts in the value and its window in the expiry, the end of the next window', async () => {
    const { limiter, key } = await setup();
    for (let attempt = 0; ; attempt++) {
      await admin.del(key());
      const before = await redisNow();
      const first = await limiter.consume('u', policy);
      const second = await limiter.consume('u', policy);
      const after = await redisNow();
      const end = after + (await admin.pttl(key()));
      const index = Math.floor(before / HOUR);
      // An hour's window that ended meanwhile: once more.
      if (Math.floor(after / HOUR) !== index && attempt < 2) continue;
      expect([first.policies[0]!.remaining, second.policies[0]!.remaining]).toEqual([4, 3]);
      expect(await admin.get(key())).toBe(packed(2, 0, index));
      // Set from the ms Redis read when it wrote: to within 2 ms, as the script reads it.
      expect(Math.abs(end - (index + 2) * HOUR)).toBeLessThanOrEqual(2);
      break;
    }
  });

  it('within its window a decision reads no clock: GET, PTTL, then INCRBY of what it admits', async () => {
    const { limiter, key } = await setup();
    const end = (await redisNow()) + 1.5 * HOUR;
    await pack(key(), 1, 0, end);
    await admin.config('RESETSTAT');
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      remaining.push((await limiter.consume('u', policy)).policies[0]!.remaining);
    }
    expect(remaining).toEqual([3, 2, 1, 0, 0]);
    const counts = await commandCalls(admin);
    expect([counts.get, counts.pttl, counts.incrby, counts.time]).toEqual([5, 5, 4, undefined]);
    expect(await admin.get(key())).toBe(packed(5, 0, Math.round(end / HOUR) - 2));
  });

  it('so does a limit whose state does not fit the one-integer reply (100,000 an hour)', async () => {
    // Regression: (limit + 1)^2 · P reached 2^53, and the decision fell to the clock's: a
    // second PTTL, TIME and a SET.
    const { limiter, key } = await setup();
    const big = { rate: '100000/h', algorithm: 'sliding-window' } as const;
    const end = (await redisNow()) + 1.5 * HOUR;
    await pack(key(), 10, 0, end);
    await admin.config('RESETSTAT');
    const d = await limiter.consume('u', big);
    expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 99_989 });
    expect(d.policies[0]!.resetMs).toBeLessThanOrEqual(1.5 * HOUR);
    expect(d.policies[0]!.resetMs).toBeGreaterThan(1.5 * HOUR - 1000);
    const counts = await commandCalls(admin);
    expect([counts.get, counts.pttl, counts.incrby, counts.time]).toEqual([1, 1, 1, undefined]);
    expect(await admin.get(key())).toBe(packed(11, 0, Math.round(end / HOUR) - 2));
  });

  it('is read as its expiry says: 4 last window and 1 in this one, half through it', async () => {
    const { limiter, key } = await setup();
    // Its window ends 1.5 h from now (the key expires a period after): 30 min into it.
    const end = (await redisNow()) + 1.5 * HOUR;
    const index = Math.round(end / HOUR) - 2;
    await pack(key(), 1, 4, end);
    // The estimate 4 × 0.5 + 1 = 3 of 5: one more (the lone path) leaves 1.
    const one = await limiter.consume('u', policy);
    expect(one.policies[0]).toMatchObject({ allowed: true, remaining: 1 });
    expect(await admin.get(key())).toBe(packed(2, 4, index));
    // 2 more (the general loop) would be 6, until the previous window's weight is down by
    // 1: a quarter of an hour.
    const refused = await limiter.consume('u', policy, { cost: 2 });
    expect(refused.allowed).toBe(false);
    const [p] = refused.policies;
    expect(p!.remaining).toBe(1);
    expect(p!.retryAfterMs).toBeLessThanOrEqual(HOUR / 4);
    expect(p!.retryAfterMs).toBeGreaterThan(HOUR / 4 - 1000);
    expect(p!.resetMs).toBeLessThanOrEqual(1.5 * HOUR);
    expect(p!.resetMs).toBeGreaterThan(1.5 * HOUR - 1000);
    expect(await admin.get(key())).toBe(packed(2, 4, index));
  });

  it('in the window after it, its count is the previous one, and the expiry moves a period on', async () => {
    const { limiter, key } = await setup();
    const now = await redisNow();
    // Its window ended at the last hour's start: this hour is the next one.
    const end = (Math.floor(now / HOUR) + 1) * HOUR;
    await pack(key(), 3, 1, end);
    const d = await limiter.consume('u', policy);
    expect(d.allowed).toBe(true);
    // 3 weigh in as the previous window's (less what this hour has run), 1 spent now.
    expect(d.policies[0]!.remaining).toBeLessThanOrEqual(1 + Math.ceil((3 * (now % HOUR)) / HOUR));
    expect(await admin.get(key())).toBe(packed(1, 3, Math.floor(now / HOUR)));
    const left = await admin.pttl(key());
    expect(Math.abs((await redisNow()) + left - (end + HOUR))).toBeLessThanOrEqual(2);
  });

  it('past its window, index digits of another window (the period changed) are no state', async () => {
    const { limiter, key } = await setup();
    const now = await redisNow();
    const index = Math.floor(now / HOUR);
    // Its window was the last hour's by the expiry, another one by its digits.
    await pack(key(), 5, 5, (index + 1) * HOUR, index + 6);
    const d = await limiter.consume('u', policy);
    expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 4 });
    expect(await admin.get(key())).toBe(packed(1, 0, index));
    // A value past the packed form's (index digits of 90 and more) is not ours either.
    await admin.set(key(), String(9e15), 'PXAT', now + 1.5 * HOUR);
    expect((await limiter.consume('u', policy)).policies[0]!.remaining).toBe(4);
    expect(await admin.get(key())).toBe(packed(1, 0, index));
  });

  it.each([3, -3, 40, -40])(
    'an expiry moved by %i ms (a key migrated, a failover) still finds its window, as the string does',
    async (driftMs) => {
      // Regression: the window's end was checked to 2 ms, and a full previous window was
      // forgotten (remaining 9 of 10 where the string form gave 2).
      const { limiter, key, prefix } = await setup();
      const now = await redisNow();
      const index = Math.floor(now / HOUR);
      // The last hour's window, full: its key expires at this hour's end.
      await pack(key(), 5, 0, (index + 1) * HOUR + driftMs, index - 1);
      const twin = policyKey(prefix, 'v', 'global', 'default', 'swc');
      await admin.set(twin, `${index - 1}:5:0`, 'PXAT', (index + 1) * HOUR);
      const [u, v] = [await limiter.consume('u', policy), await limiter.consume('v', policy)];
      expect([u.allowed, u.policies[0]!.remaining]).toEqual([v.allowed, v.policies[0]!.remaining]);
      if (u.allowed) expect(await admin.get(key())).toBe(packed(1, 5, index));
      else expect(await admin.get(key())).toBe(packed(5, 0, index - 1));
    },
  );

  it("a slow script's late PTTL still finds the previous window (Redis before 7.2)", async () => {
    // Regression, the review's input: a sliding log of 9,990 hits first, so that the
    // script's TIME (read once, at the log) and the window's PTTL are ms apart on Redis 7.0;
    // the previous window's 3 were forgotten and the expiry written some ms late.
    const { limiter, key } = await setup();
    const log = { name: 'l', rate: '10000/h', algorithm: 'sliding-log' } as const;
    const win = { name: 'w', rate: '10/h', algorithm: 'sliding-window' } as const;
    await limiter.consume('u', log, { cost: 9990 });
    const index = Math.floor((await redisNow()) / HOUR);
    await pack(key('w'), 3, 0, (index + 1) * HOUR, index - 1);
    const d = await limiter.consume('u', [log, win]);
    expect(d.allowed).toBe(true);
    expect(await admin.get(key('w'))).toBe(packed(1, 3, index));
    // Written from that early TIME: late by the script's own ms, which the next window's
    // reading takes in its stride.
    const end = (await redisNow()) + (await admin.pttl(key('w')));
    expect(Math.abs(end - (index + 2) * HOUR)).toBeLessThan(1000);
  });

  it('a previous count of 10,000,000 or more (the limit lowered below it) keeps the string', async () => {
    // Regression: it was packed past the form's bounds, and then read as no state.
    const { limiter, key } = await setup();
    const lowered = { rate: '9999999/h', algorithm: 'sliding-window' } as const;
    const index = Math.floor((await redisNow()) / HOUR);
    await admin.set(key(), `${index}:0:10000000`, 'PXAT', (index + 2) * HOUR);
    // The previous window still weighs: 10^7 × what is left of the hour.
    const left = (ms: number) =>
      Math.floor(9_999_999 - (10_000_000 * ((index + 1) * HOUR - ms)) / HOUR - 1);
    const before = await redisNow();
    const first = await limiter.consume('u', lowered);
    const after = await redisNow();
    await limiter.consume('u', lowered);
    expect(await admin.get(key())).toBe(`${index}:2:10000000`);
    expect(first.policies[0]!.remaining).toBeGreaterThanOrEqual(left(before));
    expect(first.policies[0]!.remaining).toBeLessThanOrEqual(left(after));
  });

  it('digits with a leading zero (which INCRBY refuses) are read, and written back as the script writes them', async () => {
    const { limiter, key } = await setup();
    const end = (await redisNow()) + 1.5 * HOUR;
    await admin.set(key(), '02', 'PXAT', end);
    const d = await limiter.consume('u', policy);
    expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 2 });
    expect(await admin.get(key())).toBe(packed(3, 0, Math.round(end / HOUR) - 2));
  });

  it('a request of several policies keeps a packed value packed, and its own new state a string', async () => {
    const { limiter, key } = await setup();
    const a = { ...policy, name: 'a' };
    const b = { ...policy, name: 'b' };
    const index = Math.floor((await redisNow()) / HOUR);
    await limiter.consume('u', a);
    expect(await admin.get(key('a'))).toBe(packed(1, 0, index));
    const ttl = await admin.pttl(key('a'));
    const d = await limiter.consume('u', [a, b]);
    expect(d.policies.map((p) => p.remaining)).toEqual([3, 4]);
    expect(await admin.get(key('a'))).toBe(packed(2, 0, index));
    expect(await admin.pttl(key('a'))).toBeLessThanOrEqual(ttl);
    expect(await admin.get(key('b'))).toMatch(/^\d+:1:0$/);
    // The lone path then packs b's string.
    await limiter.consume('u', b);
    expect(await admin.get(key('b'))).toBe(packed(2, 0, index));
  });

  it('a refund gives back to a packed value, which stays packed and keeps its expiry', async () => {
    const { limiter, key } = await setup();
    for (let attempt = 0; ; attempt++) {
      await admin.del(key());
      const index = Math.floor((await redisNow()) / HOUR);
      await limiter.consume('u', policy);
      // A spending that may be refunded goes the general way, and keeps the form.
      const { spending } = await limiter.spend([{ identity: 'u', policy }], { cost: 2 });
      const spent = await admin.get(key());
      const ttl = await admin.pttl(key());
      expect(await limiter.refund(spending!)).toBe(1);
      if (Math.floor((await redisNow()) / HOUR) !== index && attempt < 2) continue;
      expect(spent).toBe(packed(3, 0, index));
      expect(await admin.get(key())).toBe(packed(1, 0, index));
      expect(await admin.pttl(key())).toBeLessThanOrEqual(ttl);
      expect(await admin.pttl(key())).toBeGreaterThan(ttl - 1000);
      break;
    }
  });

  it('a limit of 10,000,000 or more, or a period under a second, keeps the string', async () => {
    const { limiter, key } = await setup();
    await limiter.consume('u', { rate: '10000000/h', algorithm: 'sliding-window', name: 'big' });
    expect(await admin.get(key('big'))).toMatch(/^\d+:1:0$/);
    await limiter.consume('u', { rate: '5/500ms', algorithm: 'sliding-window', name: 'short' });
    expect(await admin.get(key('short'))).toMatch(/^\d+:1:0$/);
  });

  it('inspect reads the packed counts, and the window index where the policy is known', async () => {
    const { limiter, store, key, prefix } = await setup();
    const index = Math.floor((await redisNow()) / HOUR);
    await pack(key(), 2, 3, (index + 2) * HOUR);
    const snapshot = await store.inspect(`${prefix}:{u}:`);
    expect(snapshot.keys).toEqual([expect.objectContaining({ key: key(), state: [2, 3] })]);
    const [known] = await limiter.inspect('u', { policies: [policy] });
    expect(known!.state).toEqual({ windowIndex: index, current: 2, previous: 3 });
    // 3 × what is left of this hour + 2, of 5.
    const elapsed = (await redisNow()) - index * HOUR;
    expect(known!.remaining).toBe(Math.floor((3 * elapsed) / HOUR));
    const [unknown] = await limiter.inspect('u');
    expect(unknown!.state).toEqual({ current: 2, previous: 3 });
  });
});
