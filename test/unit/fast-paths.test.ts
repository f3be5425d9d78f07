/**
 * The fast paths of issue 14 decide exactly as the general paths they skip:
 * - MemoryStore: one rate policy, no penalty, no control hash in the store (the general
 *   path runs once any control exists, here an exemption of another identity);
 * - RedisStore's reading of the consume script's reply: a lone token bucket/GCRA debt (a
 *   number) against the same debt given as the general path's array, and a lone fixed
 *   window's count and ms left as one integer against the two, and a lone sliding window's
 *   two counts and ms into the window as one integer against the value and `now`.
 * Random sequences with exact expectations: every outcome and every stored state equal.
 * (That the fast path is left whenever a control applies is the conformance suite's
 * overrides and exemptions on MemoryStore.)
 */
import { describe, expect, it } from '@jest/globals';
import { MemoryStore } from '../../lib/core/stores/memory/memory-store.js';
import { outcomesOf } from '../../lib/core/stores/redis/reply.js';
import { controlKey, policyKey } from '../../lib/core/model/store-keys.js';
import { ALGORITHM_IMPLS } from '../../lib/core/algorithms/index.js';
import type { StorePolicy } from '../../lib/core/stores/store.js';
import type { PolicyAlgorithm } from '../../lib/core/model/policy.js';
import { random } from '../harness/random.js';

const RATES: PolicyAlgorithm[] = ['fixed-window', 'sliding-window', 'token-bucket', 'gcra'];

function policyOf(rand: () => number, algorithm: PolicyAlgorithm, identity: string): StorePolicy {
  const limit = 1 + Math.floor(rand() * 7);
  const periodMs = [1000, 7000, 13_000, 60_000][Math.floor(rand() * 4)]!;
  const window = algorithm === 'fixed-window' || algorithm === 'sliding-window';
  const capacity = window ? limit : limit + Math.floor(rand() * 3);
  return {
    key: policyKey('fp', identity, 'global', 'default', ALGORITHM_IMPLS[algorithm].tag),
    algorithm,
    limit,
    periodMs,
    capacity,
    cost: Math.floor(rand() * 3),
    ...(rand() < 0.3 && { refundable: true as const }),
  };
}

describe('MemoryStore: one rate policy decides as the general path does', () => {
  it.each(RATES)(
    '%s: 400 random requests on the same clock, outcomes and states equal',
    async (algorithm) => {
      let now = 1_700_000_000_000;
      const clock = () => now;
      const fast = new MemoryStore({ clock, sweepIntervalMs: 0 });
      const general = new MemoryStore({ clock, sweepIntervalMs: 0 });
      // Any control in the store sends every request down the general path.
      await general.control(controlKey('fp', 'ip:someone-else'), {
        op: 'set',
        field: 'exempt',
        value: String(now + 10 * 60_000),
        ttlMs: 10 * 60_000,
        reason: 'differential test',
      });
      const rand = random(RATES.indexOf(algorithm) + 1);
      const shape = policyOf(rand, algorithm, 'ip:203.0.113.7');
      for (let i = 0; i < 400; i++) {
        now += Math.floor(rand() * 900);
        // Refundable or not per request: the fast path's mark is checked for every algorithm.
        const { refundable: _, ...plain } = shape;
        const policy: StorePolicy = {
          ...plain,
          cost: Math.floor(rand() * (shape.capacity + 2)),
          ...(rand() < 0.5 && { refundable: true as const }),
        };
        const [a, b] = await Promise.all([fast.consume([policy]), general.consume([policy])]);
        expect(a).toEqual(b);
        expect(fast.state(policy.key)).toEqual(general.state(policy.key));
        expect(fast.pttl(policy.key)).toBe(general.pttl(policy.key));
      }
    },
  );
});

describe('RedisStore reply: a lone token bucket/GCRA debt reads as the general path reads it', () => {
  it.each(['token-bucket', 'gcra'] as const)(
    '%s: 2000 random debts and policies, outcomes equal',
    (algorithm) => {
      const rand = random(algorithm === 'gcra' ? 41 : 42);
      for (let i = 0; i < 2000; i++) {
        const policy = policyOf(rand, algorithm, `ip:198.51.100.${i % 256}`);
        // A debt in ticks of 1/limit ms, up to capacity × period (and sometimes beyond).
        const debt = Math.floor(rand() * policy.capacity * policy.periodMs * policy.limit * 1.1);
        for (const mode of ['c', 'd'] as const) {
          const clock = () => 1_700_000_000_000;
          expect(outcomesOf([policy], debt, mode, clock)).toEqual(
            outcomesOf([policy], [debt], mode, clock),
          );
        }
      }
    },
  );
});

describe('RedisStore reply: a lone fixed window as one integer reads as the general path reads it', () => {
  it('2000 random counts, ms left and policies, outcomes equal', () => {
    const rand = random(43);
    for (let i = 0; i < 2000; i++) {
      const policy = policyOf(rand, 'fixed-window', `ip:198.51.100.${i % 256}`);
      // A count up to the limit (sometimes beyond: a lowered limit), and the ms left of its
      // window, up to two periods (0 and 0: no window open).
      const open = rand() < 0.9;
      const count = open ? Math.floor(rand() * policy.limit * 1.5) : 0;
      const left = open ? 1 + Math.floor(rand() * 2 * policy.periodMs) : 0;
      const lone = count * (2 * policy.periodMs + 1) + left;
      for (const mode of ['c', 'd'] as const) {
        const clock = () => 1_700_000_000_000;
        expect(outcomesOf([policy], lone, mode, clock)).toEqual(
          outcomesOf([policy], [count, left], mode, clock),
        );
      }
    }
  });
});

describe('RedisStore reply: a lone sliding window as one integer reads as the general path reads it', () => {
  it('2000 random values, times and policies, outcomes equal', () => {
    const rand = random(44);
    for (let i = 0; i < 2000; i++) {
      const { refundable: _, ...policy } = policyOf(
        rand,
        'sliding-window',
        `ip:198.51.100.${i % 256}`,
      );
      const P = policy.periodMs;
      const now = 1_700_000_000_000 + Math.floor(rand() * 10 * P);
      const index = Math.floor(now / P);
      // The stored window: this one, the one before, or an older one (none of it counts);
      // counts up to the limit (the lone path replies the value past it).
      const stored = index - Math.floor(rand() * 3);
      const [cur, prev] = [0, 1].map(() => Math.floor(rand() * (policy.limit + 1)));
      const value = rand() < 0.1 ? null : `${stored}:${cur}:${prev}`;
      // What the lone path replies (lua/lone.ts): the counts as they stand in this window.
      const [c, p] =
        value === null
          ? [0, 0]
          : stored === index
            ? [cur!, prev!]
            : stored === index - 1
              ? [0, cur!]
              : [0, 0];
      const lone = (p * (policy.limit + 1) + c) * P + (now - index * P);
      expect(outcomesOf([policy], lone, 'c', undefined)).toEqual(
        outcomesOf([policy], [value, now], 'c', undefined),
      );
    }
  });
});
