/**
 * The consume script's lone path (lua/lone.ts: one token bucket, GCRA, fixed window or sliding
 * window policy on the server clock, with its code alone) decides as its general loop does. The same
 * request goes both ways: code `4` takes the lone path, code `14` with capacity = limit and
 * cost 1 (the same policy, spelled in full) takes the loop. Twin keys get the same state,
 * then both scripts run, and their keys are read, in one MULTI between two `TIME`s: where all
 * of it ran in one ms, the replies, the values written and the expiries left must be equal
 * exactly (a sliding window's replies are in two shapes, one integer and the value with
 * `now`: RedisStore's reading of them must be).
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import {
  PACKED_BASE,
  PACKED_INDEX_MOD,
  PACKED_MIN_PERIOD_MS,
  unpackCounts,
} from '../../lib/core/algorithms/sliding-window.js';
import { CONSUME_SCRIPT } from '../../lib/core/stores/redis/lua/consume.js';
import {
  ALGORITHM_CODES,
  WITH_CAPACITY_AND_COST,
} from '../../lib/core/stores/redis/lua/protocol.js';
import { outcomesOf, type ScriptReply } from '../../lib/core/stores/redis/reply.js';
import type { StorePolicy } from '../../lib/core/stores/store.js';
import { newRedis } from '../harness/redis.js';
import { random } from '../harness/random.js';

const ms = (time: readonly (string | number)[]) =>
  Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);

/** A sliding window's stored value, in either form, as `[index, cur, prev]`. */
function stateOf(value: unknown, ttlMs: number, nowMs: number, periodMs: number) {
  if (value === null) return null;
  const string = /^(\d+):(\d+):(\d+)$/.exec(String(value));
  if (string) return string.slice(1).map(Number);
  const counts = unpackCounts(String(value));
  return counts && [Math.round((nowMs + ttlMs) / periodMs) - 2, ...counts];
}

describe('the lone path decides as the general loop', () => {
  const client = newRedis();
  afterAll(() => client.quit());

  it.each(['gcra', 'token-bucket', 'fixed-window', 'sliding-window'] as const)(
    '%s: 300 random states, the same reply, value and expiry both ways',
    async (algorithm) => {
      const rand = random(algorithm.length);
      const sliding = algorithm === 'sliding-window';
      const code = ALGORITHM_CODES[algorithm];
      let exact = 0;
      let packed = 0;
      // Sliding windows decided from a packed value's expiry, or on the clock after it.
      let fromExpiry = 0;
      for (let i = 0; i < 300; i++) {
        // 100,000 an hour: a sliding window's state past the one-integer reply; 500 ms below
        // its packed form's least period (the string stays).
        const limit = [1, 3, 7, 10, 6000, 100_000][Math.floor(rand() * (sliding ? 6 : 5))]!;
        const periodMs = [1000, 7000, 60_000, 500, 3_600_000][
          Math.floor(rand() * (sliding ? 5 : 3))
        ]!;
        const keys = [`lone:{${algorithm}${i}}:a`, `lone:{${algorithm}${i}}:b`];
        // A state: none, or a value with an expiry (or without one) of up to 2.2 periods.
        const kind = rand();
        const now = ms(await client.time());
        const count = () => Math.floor(rand() * (limit + 3));
        // A sliding window's: the window now falls in, or one of the two before, or the next
        // (a clock that stepped back); counts up to past the limit (a lowered one).
        // Half of them packed (PACKED_BASE), mostly expiring at that window's end, as written;
        // their index digits mostly that window's.
        const windowIndex = Math.floor(now / periodMs) + Math.floor(rand() * 4) - 2;
        const packedForm = sliding && rand() < 0.5;
        const digits = (windowIndex + (rand() < 0.8 ? 0 : 1)) % PACKED_INDEX_MOD;
        const value = packedForm
          ? String((digits * PACKED_BASE + count()) * PACKED_BASE + count())
          : sliding
            ? `${windowIndex}:${count()}:${count()}`
            : algorithm === 'fixed-window'
              ? String(count())
              : String(rand() < 0.5 ? 0 : Math.floor(rand() * limit));
        // The same expiry on both keys to the ms: PXAT, not PX (two SETs may span a ms).
        // Some moved by up to 30 ms (a key migrated, a failover): still that window's.
        const drift = rand() < 0.3 ? Math.round((rand() - 0.5) * 60) : 0;
        const pxat =
          packedForm && rand() < 0.8
            ? (windowIndex + 2) * periodMs + drift
            : now + 1 + Math.floor(rand() * 2.2 * periodMs);
        const setup = client.multi();
        for (const key of keys) {
          setup.del(key);
          if (kind < 0.8) setup.set(key, kind < 0.1 ? 'junk' : value, 'PXAT', pxat);
          else if (kind < 0.85) setup.set(key, value);
        }
        await setup.exec();
        const results = (await client
          .multi()
          .time()
          .eval(CONSUME_SCRIPT, 1, keys[0]!, 'c', code, limit, periodMs)
          .eval(
            CONSUME_SCRIPT,
            1,
            keys[1]!,
            'c',
            code + WITH_CAPACITY_AND_COST,
            limit,
            periodMs,
            limit,
            1,
          )
          .get(keys[0]!)
          .get(keys[1]!)
          .pttl(keys[0]!)
          .pttl(keys[1]!)
          .time()
          .exec())!.map(([error, reply]) => {
          expect(error).toBeNull();
          return reply;
        });
        const [before, lone, general, valueA, valueB, ttlA, ttlB, after] = results;
        if (ms(before as [string, string]) !== ms(after as [string, string])) continue;
        exact++;
        if (!sliding) {
          expect([valueA, ttlA]).toEqual([valueB, ttlB]);
          expect(lone).toEqual(general);
          continue;
        }
        // The same state; the lone path packs what the loop keeps as a string (a state of its
        // own), but below the packed form's least period, and the packed form's expiry is its
        // window's: the same as the string's, or set anew where the lone path packed it.
        const at = ms(after as [string, string]);
        const stateA = stateOf(valueA, ttlA as number, at, periodMs);
        expect(stateA).toEqual(stateOf(valueB, ttlB as number, at, periodMs));
        const repacked = /^\d+$/.test(String(valueA)) && /:/.test(String(valueB));
        expect(ttlA).toBe(repacked ? (stateA![0]! + 2) * periodMs - at : ttlB);
        // Both packed: the same value, its index digits too (in its window a packed value is
        // read whatever they say, and they decide whether it counts once its window is over).
        if (!repacked) expect(valueA).toBe(valueB);
        const wrote = valueA !== (kind < 0.1 ? 'junk' : value);
        if (wrote) expect(/^\d+$/.test(String(valueA))).toBe(periodMs >= PACKED_MIN_PERIOD_MS);
        const policy: StorePolicy = {
          key: keys[0]!,
          algorithm,
          limit,
          periodMs,
          capacity: limit,
          cost: 1,
        };
        const read = (reply: unknown) => outcomesOf([policy], reply as ScriptReply, 'c', undefined);
        expect(read(lone)).toEqual(read(general));
        // One integer, but where a count is past the limit or the clock stepped back.
        if (typeof lone === 'number') packed++;
        if (typeof lone === 'number' && packedForm) fromExpiry++;
      }
      // Most pairs run within one ms, even on a loaded machine.
      expect(exact).toBeGreaterThan(150);
      if (sliding) expect(packed).toBeGreaterThan(exact / 4);
      if (sliding) expect(fromExpiry).toBeGreaterThan(exact / 10);
    },
  );

  it('a fixed window whose one integer would reach 2^53 is replied as the pair on both paths', async () => {
    // 60,000,000 × (2 × 86,400,000 + 1) > 2^53: a day's window of a 100,000,000/d policy.
    const code = ALGORITHM_CODES['fixed-window'];
    const [a, b] = ['lone:{big}:a', 'lone:{big}:b'];
    const pxat = ms(await client.time()) + 3_600_000;
    await client.multi().set(a, '60000000', 'PXAT', pxat).set(b, '60000000', 'PXAT', pxat).exec();
    const lone = (await client.eval(CONSUME_SCRIPT, 1, a, 'c', code, 1e8, 86_400_000)) as number[];
    const general = (await client.eval(
      CONSUME_SCRIPT,
      1,
      b,
      'c',
      code + WITH_CAPACITY_AND_COST,
      1e8,
      86_400_000,
      1e8,
      1,
    )) as number[];
    expect(lone).toHaveLength(2);
    expect(lone[0]).toBe(60_000_000);
    expect(lone[1]).toBeGreaterThan(3_500_000);
    expect(lone[1]).toBeLessThanOrEqual(3_600_000);
    expect(general[0]).toBe(60_000_000);
    expect(Math.abs(general[1]! - lone[1]!)).toBeLessThanOrEqual(50);
    expect([await client.get(a), await client.get(b)]).toEqual(['60000001', '60000001']);
  });

  it('a sliding window whose one integer would reach 2^53 is replied as the value and now', async () => {
    // (10^8 + 1)^2 × 86,400,000 > 2^53: a 100,000,000/d policy, whatever its counts.
    const code = ALGORITHM_CODES['sliding-window'];
    const key = 'lone:{big-sw}';
    const day = Math.floor(ms(await client.time()) / 86_400_000);
    await client.set(key, `${day}:60000000:5`, 'PX', 3_600_000);
    const lone = (await client.eval(CONSUME_SCRIPT, 1, key, 'c', code, 1e8, 86_400_000)) as [
      string,
      number,
    ];
    expect(lone).toHaveLength(2);
    expect(lone[0]).toBe(`${day}:60000000:5`);
    expect(Math.floor(lone[1] / 86_400_000)).toBe(day);
    expect(await client.get(key)).toBe(`${day}:60000001:5`);
  });
});
