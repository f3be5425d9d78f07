import { afterAll, describe, expect, it } from '@jest/globals';
import { ALGORITHMS } from '../../lib/core/model/policy.js';
import { CONSUME_SCRIPT } from '../../lib/core/stores/redis/lua/consume.js';
import {
  ALGORITHM_CODES,
  WITH_CAPACITY_AND_COST,
} from '../../lib/core/stores/redis/lua/protocol.js';
import { REFUND_SCRIPT } from '../../lib/core/stores/redis/lua/refund.js';
import { newRedis } from '../harness/redis.js';

/** The scripts' codes (protocol.ts): each algorithm runs on its own code only. */
describe('the Lua protocol', () => {
  const admin = newRedis();
  afterAll(() => admin.quit());

  it('gives every algorithm and concurrency a code of its own, one digit below the capacity-and-cost mark', () => {
    const codes = Object.values(ALGORITHM_CODES);
    expect(Object.keys(ALGORITHM_CODES).sort()).toEqual([...ALGORITHMS, 'concurrency'].sort());
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) {
      expect(Number.isInteger(code) && code >= 1 && code < WITH_CAPACITY_AND_COST).toBe(true);
    }
  });

  it('answers a code no algorithm has with an error, in every form, and writes nothing', async () => {
    const unknown = Math.max(...Object.values(ALGORITHM_CODES)) + 1;
    const forms = [
      [`${unknown}`, 10, 1000],
      [`-${unknown}`, 10, 1000],
      [`${unknown + WITH_CAPACITY_AND_COST}`, 10, 1000, 20, 1],
      [`${unknown}b5000`, 10, 1000],
      [`${unknown}:lease`, 10, 1000],
    ];
    for (const args of forms) {
      await expect(admin.eval(CONSUME_SCRIPT, 1, 'proto:{u}:x', 'c', ...args)).rejects.toThrow(
        `no algorithm has code ${unknown}`,
      );
    }
    await expect(
      admin.eval(REFUND_SCRIPT, 1, 'proto:{u}:x', '', unknown, 10, 1000, 1, 0),
    ).rejects.toThrow(`no algorithm has code ${unknown}`);
    // Concurrency limits are released, never refunded.
    await expect(
      admin.eval(REFUND_SCRIPT, 1, 'proto:{u}:x', '', ALGORITHM_CODES.concurrency, 1, 1000, 1, 0),
    ).rejects.toThrow(`no algorithm has code ${ALGORITHM_CODES.concurrency}`);
    await expect(admin.eval(CONSUME_SCRIPT, 1, 'proto:{u}:x', 'c', 'x4', 10, 1000)).rejects.toThrow(
      'bad policy code "x4"',
    );
    expect(await admin.exists('proto:{u}:x', 'proto:{u}:x:b')).toBe(0);
  });
});
