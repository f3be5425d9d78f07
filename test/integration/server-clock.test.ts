import { afterAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { RateLimiter, RedisStore, type Algorithm } from '../../lib/index.js';
import { policyKey } from '../../lib/core/model/store-keys.js';
import { newRedis } from '../harness/redis.js';

/**
 * Token bucket and GCRA on the Redis server clock keep their debt in the key's expiry (see
 * stores/redis/lua/consume.ts), a path the injected-clock tests never take. Time is moved by
 * shortening the expiry, as elapsed time would; the few ms that really pass during a test
 * can only lower a debt, so bounds are one-sided and tight.
 */
describe.each(['token-bucket', 'gcra'] as const)(
  '%s on the server clock',
  (algorithm: Algorithm) => {
    const client = newRedis({ autoResendUnfulfilledCommands: false });
    afterAll(() => client.quit());

    function setup() {
      const prefix = `sc${randomUUID().slice(0, 8)}`;
      const limiter = new RateLimiter({
        store: new RedisStore({ client }),
        prefix,
        timeoutMs: 5000,
      });
      const key = () =>
        policyKey(prefix, 'u', 'global', 'default', algorithm === 'gcra' ? 'gcra' : 'tb');
      return { limiter, key };
    }

    it('a whole-ms emission interval: the TAT is the expiry and nothing else is stored', async () => {
      const { limiter, key } = setup();
      const policy = { rate: '10/s', algorithm } as const; // T = 100 ms
      const start = Date.now();
      const first = await limiter.consume('u', policy, { cost: 4 });
      expect(first.allowed).toBe(true);
      expect(first.policies[0]).toMatchObject({ remaining: 6, resetMs: 400 });
      const pttl = await client.pttl(key());
      expect(pttl).toBeGreaterThanOrEqual(400 - (Date.now() - start));
      expect(pttl).toBeLessThanOrEqual(400);
      expect(await client.get(key())).toBe('0');
      // 7 more cannot fit (6 left); nothing is spent, and the wait is what 1 token takes.
      const denied = await limiter.consume('u', policy, { cost: 7 });
      expect(denied.allowed).toBe(false);
      expect(denied.policies[0]!.retryAfterMs).toBeGreaterThanOrEqual(
        100 - (Date.now() - start) - 1,
      );
      expect(denied.policies[0]!.retryAfterMs).toBeLessThanOrEqual(100);
      expect(await client.pttl(key())).toBeLessThanOrEqual(pttl);
      // 250 ms later (the expiry moved 250 ms closer), 2.5 tokens are back: 8 left.
      await client.pexpire(key(), (await client.pttl(key())) - 250);
      // (Each ms that really passed since the first call returns 0.01 token more.)
      const left = (await limiter.peek('u', policy)).policies[0]!.remaining;
      expect(left).toBeGreaterThanOrEqual(8);
      expect(left).toBeLessThanOrEqual(Math.floor(8.5 + (Date.now() - start) / 100));
    });

    it('a fractional emission interval keeps the sub-ms credit exact', async () => {
      const { limiter, key } = setup();
      const policy = { rate: '3/s', algorithm } as const; // T = 333.33 ms = 1000 ticks of 1/3 ms
      const start = Date.now();
      expect((await limiter.consume('u', policy)).allowed).toBe(true);
      // Debt 1000 ticks = 333.33 ms: the expiry is rounded up to 334 ms, credit 2 ticks.
      expect(await client.get(key())).toBe('2');
      expect(await client.pttl(key())).toBeLessThanOrEqual(334);
      for (let i = 0; i < 2; i++) expect((await limiter.consume('u', policy)).allowed).toBe(true);
      // 3 × 1000 ticks = 1000 ms exactly: no credit left over.
      expect(await client.get(key())).toBe('0');
      const denied = await limiter.consume('u', policy);
      expect(denied.allowed).toBe(false);
      expect(denied.policies[0]!.retryAfterMs).toBeLessThanOrEqual(334);
      expect(denied.policies[0]!.retryAfterMs).toBeGreaterThanOrEqual(
        334 - (Date.now() - start) - 1,
      );
    });

    it('a credit that is not a whole number of ticks below the limit counts as none', async () => {
      const { limiter, key } = setup();
      // A value from elsewhere (an older format's TAT) on a full 3/s bucket: 1000 ms of debt.
      await client.set(key(), '1732950000000', 'PX', 1000);
      const d = await limiter.consume('u', { rate: '3/s', algorithm });
      expect(d.allowed).toBe(false);
      expect(d.policies[0]!.remaining).toBe(0);
    });

    it('a key without an expiry (not written by us) counts as no debt and gets one', async () => {
      const { limiter, key } = setup();
      await client.set(key(), 'junk');
      const d = await limiter.consume('u', { rate: '5/m', algorithm });
      expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 4 });
      expect(await client.pttl(key())).toBeGreaterThan(11_000);
    });
  },
);

/**
 * The fixed window on the Redis server clock keeps its count in the value and its window's
 * end in the key's expiry (see fixed-window.ts): no `TIME`, `INCRBY` while the window goes
 * on. Time is moved by shortening the expiry, as elapsed time would.
 */
describe('fixed-window on the server clock', () => {
  const client = newRedis({ autoResendUnfulfilledCommands: false });
  afterAll(() => client.quit());

  function setup() {
    const prefix = `sc${randomUUID().slice(0, 8)}`;
    const store = new RedisStore({ client });
    const limiter = new RateLimiter({ store, prefix, timeoutMs: 5000 });
    const key = policyKey(prefix, 'u', 'global', 'default', 'fwc');
    return { limiter, store, key };
  }
  const policy = { rate: '10/m', algorithm: 'fixed-window' } as const;

  it('the count is the value and the window ends with the key; a refusal writes nothing', async () => {
    const { limiter, key } = setup();
    const start = Date.now();
    const first = await limiter.consume('u', policy, { cost: 4 });
    expect(first.policies[0]).toMatchObject({ allowed: true, remaining: 6, resetMs: 60_000 });
    expect(await client.get(key)).toBe('4');
    const opened = await client.pttl(key);
    expect(opened).toBeGreaterThanOrEqual(60_000 - (Date.now() - start) - 1);
    expect(opened).toBeLessThanOrEqual(60_000);
    // 30 s later (the expiry moved 30 s closer): the same window, its end kept.
    await client.pexpire(key, opened - 30_000);
    const second = await limiter.consume('u', policy, { cost: 2 });
    expect(second.policies[0]!.remaining).toBe(4);
    expect(second.policies[0]!.resetMs).toBeLessThanOrEqual(30_000);
    expect(second.policies[0]!.resetMs).toBeGreaterThanOrEqual(30_000 - (Date.now() - start) - 1);
    expect(await client.get(key)).toBe('6');
    expect(await client.pttl(key)).toBeLessThanOrEqual(opened - 30_000);
    // 5 more cannot fit (4 left): refused until the window ends, and nothing is written.
    const denied = await limiter.consume('u', policy, { cost: 5 });
    expect(denied.allowed).toBe(false);
    expect(denied.policies[0]).toMatchObject({ remaining: 4 });
    expect(denied.policies[0]!.retryAfterMs).toBeLessThanOrEqual(30_000);
    expect(denied.policies[0]!.retryAfterMs).toBeGreaterThan(29_000 - (Date.now() - start));
    expect(await client.get(key)).toBe('6');
    // Once the key has expired, a new window opens with the full limit.
    await client.del(key);
    const next = await limiter.consume('u', policy, { cost: 10 });
    expect(next.policies[0]).toMatchObject({ allowed: true, remaining: 0, resetMs: 60_000 });
    expect(await client.get(key)).toBe('10');
  });

  it('a value that is not a count, or a key without an expiry, is no window, and is replaced', async () => {
    const { limiter, key } = setup();
    // 0.1.0's format, "<count>:<windowEndMs>", under this tag, and a key nobody gave an expiry.
    for (const [value, px] of [
      ['7:1796498780445', 30_000],
      ['9', undefined],
    ] as const) {
      if (px === undefined) await client.set(key, value);
      else await client.set(key, value, 'PX', px);
      const d = await limiter.consume('u', policy);
      expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 9, resetMs: 60_000 });
      expect(await client.get(key)).toBe('1');
      expect(await client.pttl(key)).toBeGreaterThan(59_000);
    }
  });

  it('a window whose end is more than two periods away was not written at this period: none', async () => {
    const { limiter, key } = setup();
    // The policy was 10/h; it is 10/m now, and an hour's window is still open.
    await client.set(key, '10', 'PX', 3_000_000);
    const d = await limiter.consume('u', policy);
    expect(d.policies[0]).toMatchObject({ allowed: true, remaining: 9, resetMs: 60_000 });
    expect(await client.pttl(key)).toBeLessThanOrEqual(60_000);
  });

  it('a refund gives back in the window the request spent in, found by its end on the server clock', async () => {
    const { limiter, key } = setup();
    const { spending } = await limiter.spend([{ identity: 'u', policy }], { cost: 3 });
    expect(await client.get(key)).toBe('3');
    // The mark is the window's end on the server clock: its key's expiry, to the ms.
    expect(spending!.refunds[0]!.refund.mark).toBe(await client.pexpiretime(key));
    // This process's clock plays no part: a minute forward, the window is still found.
    const realNow = Date.now;
    Date.now = () => realNow() + 61_000;
    try {
      expect(await limiter.refund(spending!)).toBe(1);
    } finally {
      Date.now = realNow;
    }
    expect(await client.get(key)).toBe('0');
    // Given twice: nothing is left to give back, and the count stays at 0.
    expect(await limiter.refund(spending!)).toBe(0);
    expect(await client.get(key)).toBe('0');
  });

  it('each fixed window of a request gets its own end as its mark, whatever it is stacked with', async () => {
    // A sliding log of 2,000 hits first (its script work once made a mark read early miss the
    // window by the ms it took), two fixed windows, a token bucket and a sliding window.
    const { limiter } = setup();
    const log = { rate: '5000/m', algorithm: 'sliding-log', name: 'log' } as const;
    for (let i = 0; i < 4; i++) await limiter.consume('u', log, { cost: 500 });
    const entries = [
      { identity: 'u', policy: log },
      { identity: 'u', policy: { rate: '10/m', algorithm: 'fixed-window', name: 'a' } },
      { identity: 'u', policy: { rate: '10/m', algorithm: 'token-bucket', name: 'b' } },
      { identity: 'u', policy: { rate: '10/s', algorithm: 'fixed-window', name: 'c' } },
      { identity: 'u', policy: { rate: '10/m', algorithm: 'sliding-window', name: 'd' } },
    ] as const;
    const { decision, spending } = await limiter.spend(entries);
    expect(decision.allowed).toBe(true);
    const refunds = spending!.refunds.map((r) => r.refund);
    const fixed = refunds.filter((r) => r.algorithm === 'fixed-window');
    expect(fixed).toHaveLength(2);
    for (const r of fixed) expect(r.mark).toBe(await client.pexpiretime(r.key));
    // Every policy gets its spending back: the two windows found by their ends.
    expect(await limiter.refund(spending!)).toBe(5);
    for (const r of fixed) expect(await client.get(r.key)).toBe('0');
  });

  it("a refund gives nothing to a window opened since, even one that ends within the old one's period", async () => {
    // The review's input: 5/10s, spend 1, reset 200 ms later, a new window spends 3, then
    // the refund. (The 200 ms pass as the other tests let time pass: the new window's
    // expiry is moved 200 ms later, where a window opened then would end.)
    const { limiter, key } = setup();
    const short = { rate: '5/10s', algorithm: 'fixed-window' } as const;
    const { spending } = await limiter.spend([{ identity: 'u', policy: short }]);
    expect(await limiter.reset('u')).toBe(1);
    expect((await limiter.consume('u', short, { cost: 3 })).allowed).toBe(true);
    await client.pexpire(key, (await client.pttl(key)) + 200);
    expect(await limiter.refund(spending!)).toBe(0);
    expect(await client.get(key)).toBe('3');
    // The same when the key expired and a window opened after it, which ends a period or
    // more after the first (here: deleted, reopened, its end moved a period on).
    const again = await limiter.spend([{ identity: 'u', policy: short }]);
    expect(await client.get(key)).toBe('4');
    await client.del(key);
    expect((await limiter.consume('u', short)).allowed).toBe(true);
    await client.pexpire(key, (await client.pttl(key)) + 10_000);
    expect(await limiter.refund(again.spending!)).toBe(0);
    expect(await client.get(key)).toBe('1');
  });
});

describe('sliding-log on the server clock', () => {
  const client = newRedis({ autoResendUnfulfilledCommands: false });
  afterAll(() => client.quit());

  it('a refund of hits that have expired gives nothing, though newer hits keep the log', async () => {
    // The input: a hit logged 60.1 s ago (5/m: expired) and one 1 s ago; the refund of the
    // old one took the expired entry out and counted it given (1).
    const prefix = `sc${randomUUID().slice(0, 8)}`;
    const limiter = new RateLimiter({ store: new RedisStore({ client }), prefix, timeoutMs: 5000 });
    const key = policyKey(prefix, 'u', 'global', 'default', 'sl');
    const policy = { rate: '5/m', algorithm: 'sliding-log' } as const;
    const { spending } = await limiter.spend([{ identity: 'u', policy }]);
    const { index, refund } = spending!.refunds[0]!;
    const hit = Number(await client.get(key));
    expect(refund.mark).toBe(hit);
    const old = hit - 60_100;
    await client.set(key, `${old}:${hit - 1000}`, 'KEEPTTL');
    const late = { refunds: [{ index, refund: { ...refund, mark: old } }] };
    expect(await limiter.refund(late)).toBe(0);
    expect(await client.get(key)).toBe(`${old}:${hit - 1000}`);
    // A hit that still counts is given back.
    const live = { refunds: [{ index, refund: { ...refund, mark: hit - 1000 } }] };
    expect(await limiter.refund(live)).toBe(1);
    expect(await client.get(key)).toBe(`${old}`);
  });
});

describe('sliding-window on the server clock', () => {
  const client = newRedis({ autoResendUnfulfilledCommands: false });
  afterAll(() => client.quit());
  const window = async () => Math.floor(Number((await client.time())[0]) / 3600);

  it('a refund two windows on gives nothing, though a later spending keeps the window as the previous one', async () => {
    // The review's input: spent in window m, spent again in m + 1 (the value "m+1:1:1"), the
    // refund at (m + 2)·P or later gave back 1 on Redis (memory gave 0). Windows of an hour;
    // tried again if one ended meanwhile (the control's refund would then be a window late).
    const policy = { rate: '5/h', algorithm: 'sliding-window' } as const;
    for (let attempt = 0; ; attempt++) {
      const prefix = `sc${randomUUID().slice(0, 8)}`;
      const limiter = new RateLimiter({
        store: new RedisStore({ client }),
        prefix,
        timeoutMs: 5000,
      });
      const key = policyKey(prefix, 'u', 'global', 'default', 'swc');
      const { spending } = await limiter.spend([{ identity: 'u', policy }]);
      const { index, refund } = spending!.refunds[0]!;
      const current = Number((await client.get(key))!.split(':')[0]); // the window index now
      expect(refund.mark).toBe(current);
      const spentIn = (mark: number) => ({ refunds: [{ index, refund: { ...refund, mark } }] });
      // Spent two windows ago, the value at the window after it: nothing.
      await client.set(key, `${current - 1}:1:1`, 'KEEPTTL');
      const late = await limiter.refund(spentIn(current - 2));
      const lateValue = await client.get(key);
      // Spent in the previous window, which still counts: given back.
      await client.set(key, `${current}:1:1`, 'KEEPTTL');
      const given = await limiter.refund(spentIn(current - 1));
      const givenValue = await client.get(key);
      if ((await window()) !== current && attempt < 2) continue;
      expect([late, lateValue]).toEqual([0, `${current - 1}:1:1`]);
      expect([given, givenValue]).toEqual([1, `${current}:1:0`]);
      break;
    }
  });
});
