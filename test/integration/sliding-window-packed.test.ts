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
  /** Writes `prev · 10^7 + cur` expiring at `atMs` (ms since the epoch). */
  const pack = (key: string, cur: number, prev: number, atMs: number) =>
    admin.set(key, String(prev * 10_000_000 + cur), 'PXAT', atMs);

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
      expect(await admin.get(key())).toBe('2');
      // Set from the ms Redis read when it wrote: to within 2 ms, as the script reads it.
      expect(Math.abs(end - (index + 2) * HOUR)).toBeLessThanOrEqual(2);
      break;
    }
  });

  it('within its window a decision reads no clock: GET, PTTL, then INCRBY of what it admits', async () => {
    const { limiter, key } = await setup();
    await pack(key(), 1, 0, (await redisNow()) + 1.5 * HOUR);
    await admin.config('RESETSTAT');
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      remaining.push((await limiter.consume('u', policy)).policies[0]!.remaining);
    }
    expect(remaining).toEqual([3, 2, 1, 0, 0]);
    const counts = await commandCalls(admin);
    expect([counts.get, counts.pttl, counts.incrby, counts.time]).toEqual([5, 5, 4, undefined]);
    expect(await admin.get(key())).toBe('5');
  });

  it('is read as its expiry says: 4 last window and 1 in this one, half through it', async () => {
    const { limiter, key } = await setup();
    // Its window ends 1.5 h from now (the key expires a period after): 30 min into it.
    await pack(key(), 1, 4, (await redisNow()) + 1.5 * HOUR);
    // The estimate 4 × 0.5 + 1 = 3 of 5: one more (the lone path) leaves 1.
    const one = await limiter.consume('u', policy);
    expect(one.policies[0]).toMatchObject({ allowed: true, remaining: 1 });
    expect(await admin.get(key())).toBe('40000002');
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
    expect(await admin.get(key())).toBe('40000002');
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
    expect(await admin.get(key())).toBe('30000001');
    const left = await admin.pttl(key());
    expect(Math.abs((await redisNow()) + left - (end + HOUR))).toBeLessThanOrEqual(2);
  });

  it('past its window, an expiry at no window end of this period (the period changed) is no state', async () => {
    const { limiter, key } = await setup();
    // Half an hour left, not at an hour's end: written at another period.
    const now = await redisNow();
    let end = now + HOUR / 2;
    if (Math.abs(end - Math.round(end / HOUR) * HOUR) < 100) end += 1000;
    await pack(key(), 5, 5, end);
    const d = await limiter.consume('u', policy);
    expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 4 });
    expect(await admin.get(key())).toBe('1');
    // A value whose counts pass the base is not ours either.
    await pack(key(), 0, 10_000_000, now + 1.5 * HOUR);
    expect((await limiter.consume('u', policy)).policies[0]!.remaining).toBe(4);
    expect(await admin.get(key())).toBe('1');
  });

  it('digits with a leading zero (which INCRBY refuses) are read, and written back as the script writes them', async () => {
    const { limiter, key } = await setup();
    await admin.set(key(), '02', 'PXAT', (await redisNow()) + 1.5 * HOUR);
    const d = await limiter.consume('u', policy);
    expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 2 });
    expect(await admin.get(key())).toBe('3');
  });

  it('a request of several policies keeps a packed value packed, and its own new state a string', async () => {
    const { limiter, key } = await setup();
    const a = { ...policy, name: 'a' };
    const b = { ...policy, name: 'b' };
    await limiter.consume('u', a);
    expect(await admin.get(key('a'))).toBe('1');
    const ttl = await admin.pttl(key('a'));
    const d = await limiter.consume('u', [a, b]);
    expect(d.policies.map((p) => p.remaining)).toEqual([3, 4]);
    expect(await admin.get(key('a'))).toBe('2');
    expect(await admin.pttl(key('a'))).toBeLessThanOrEqual(ttl);
    expect(await admin.get(key('b'))).toMatch(/^\d+:1:0$/);
    // The lone path then packs b's string.
    await limiter.consume('u', b);
    expect(await admin.get(key('b'))).toBe('2');
  });

  it('a refund gives back to a packed value, which stays packed and keeps its expiry', async () => {
    const { limiter, key } = await setup();
    for (let attempt = 0; ; attempt++) {
      await admin.del(key());
      const index = Math.floor((await redisNow()) / HOUR);
      await limiter.consume('u', policy);
      // A spending that may be refunded goes the general way, and keeps the form.
      const { spending } = await limiter.spend([{ identity: 'u', policy }], { cost: 2 });
      expect(await admin.get(key())).toBe('3');
      const ttl = await admin.pttl(key());
      expect(await limiter.refund(spending!)).toBe(1);
      if (Math.floor((await redisNow()) / HOUR) !== index && attempt < 2) continue;
      expect(await admin.get(key())).toBe('1');
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
