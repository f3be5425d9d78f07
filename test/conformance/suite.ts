/**
 * The conformance suite of DESIGN §4: one set of rules, run against every store
 * (MemoryStore, Redis standalone, Redis Cluster) with an injected clock.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import {
  definePolicy,
  RateLimiter,
  type Algorithm,
  type Decision,
  type PolicyInput,
} from '../../lib/index.js';
import { ALGORITHMS, resolvePolicy } from '../../lib/core/model/policy.js';
import { policyKey } from '../../lib/core/model/store-keys.js';
import { ALGORITHM_IMPLS } from '../../lib/core/algorithms/index.js';
import type { Outcome, State } from '../../lib/core/algorithms/types.js';
import { countedDown, type StoreFixture, type StoreKind } from './stores.js';

/** A clock the test moves by hand; starts on a whole number of seconds (and of 13 s). */
export class TestClock {
  now = 1_800_000_000_000 - (1_800_000_000_000 % 13_000);
  readonly read = (): number => this.now;
}

/** A limiter on a fresh prefix, so tests sharing one Redis never see each other's keys. */
export function setup(kind: StoreKind) {
  const clock = new TestClock();
  const fixture: StoreFixture = kind.make(clock.read);
  const prefix = `t${randomUUID().slice(0, 8)}`;
  const limiter = new RateLimiter({ store: fixture.store, prefix, timeoutMs: 5000 });
  const keyOf = (identity: string, p: PolicyInput, scope = 'global') =>
    policyKey(
      prefix,
      identity,
      p.scope ?? scope,
      p.name ?? 'default',
      ALGORITHM_IMPLS[p.algorithm ?? 'token-bucket'].tag,
    );
  return { clock, fixture, limiter, keyOf };
}

/** What a client reads of one policy's decision. */
function answer(o: Pick<Outcome, 'allowed' | 'remaining' | 'resetMs' | 'retryAfterMs'>) {
  return [o.allowed, o.remaining, o.resetMs, o.retryAfterMs];
}

function sameAnswer(a: Parameters<typeof answer>[0], b: Parameters<typeof answer>[0]): boolean {
  return answer(a).every((value, i) => value === answer(b)[i]);
}

export function only(decision: Decision) {
  expect(decision.policies).toHaveLength(1);
  return decision.policies[0]!;
}

/** Expected outcomes of 5/s at a fresh, window-aligned identity: see each row. */
const BOUNDARY: Record<
  Algorithm,
  { resets: number[]; deniedResetMs: number; retryAfterMs: number; remainingAfterRetry: number }
> = {
  // The window opens at the first request and closes 1000 ms later.
  'fixed-window': {
    resets: [1000, 1000, 1000, 1000, 1000],
    deniedResetMs: 1000,
    retryAfterMs: 1000,
    remainingAfterRetry: 4,
  },
  // The estimate decays to 0 at the end of the next window; the 6th request waits until
  // 5·(1 - 200/1000) = 4 leaves room for one.
  'sliding-window': {
    resets: [2000, 2000, 2000, 2000, 2000],
    deniedResetMs: 2000,
    retryAfterMs: 1200,
    remainingAfterRetry: 0,
  },
  // Each hit expires 1000 ms after it: the log is full until the first one does.
  'sliding-log': {
    resets: [1000, 1000, 1000, 1000, 1000],
    deniedResetMs: 1000,
    retryAfterMs: 1000,
    remainingAfterRetry: 4,
  },
  // One token every 200 ms.
  'token-bucket': {
    resets: [200, 400, 600, 800, 1000],
    deniedResetMs: 1000,
    retryAfterMs: 200,
    remainingAfterRetry: 0,
  },
  gcra: {
    resets: [200, 400, 600, 800, 1000],
    deniedResetMs: 1000,
    retryAfterMs: 200,
    remainingAfterRetry: 0,
  },
};

export function conformanceSuite(makeKind: () => StoreKind): void {
  const kind = makeKind();
  afterAll(() => kind.close());

  describe.each(ALGORITHMS)('%s', (algorithm) => {
    const policy = { rate: '5/s', algorithm } as const;

    it('admits up to the limit, then denies, with exact remaining, resetMs and retryAfterMs', async () => {
      const { clock, limiter } = setup(kind);
      const expected = BOUNDARY[algorithm];
      for (let i = 0; i < 5; i++) {
        const d = await limiter.consume('alice', policy);
        expect(d.allowed).toBe(true);
        expect(only(d)).toEqual({
          name: 'default',
          allowed: true,
          limit: 5,
          remaining: 4 - i,
          resetMs: expected.resets[i],
          retryAfterMs: 0,
        });
      }
      const denied = await limiter.consume('alice', policy);
      expect(denied).toEqual({
        allowed: false,
        reason: 'limit_exceeded',
        policies: [
          {
            name: 'default',
            allowed: false,
            limit: 5,
            remaining: 0,
            resetMs: expected.deniedResetMs,
            retryAfterMs: expected.retryAfterMs,
          },
        ],
      });
      clock.now += expected.retryAfterMs - 2;
      expect((await limiter.consume('alice', policy)).allowed).toBe(false);
      clock.now += 1;
      expect((await limiter.consume('alice', policy)).allowed).toBe(false);
      clock.now += 1;
      const retried = only(await limiter.consume('alice', policy));
      expect(retried.allowed).toBe(true);
      expect(retried.remaining).toBe(expected.remainingAfterRetry);
    });

    it('retryAfterMs is tight for any state and cost: admitted at +retryAfterMs, not 1 ms before', async () => {
      const { clock, limiter } = setup(kind);
      const rates = ['3/s', '7/13s', '10/500ms', '100/m'];
      const costs = [1, 2, 3, 1, 5, 2, 7, 1, 3];
      for (const [r, rate] of rates.entries()) {
        const p = { rate, algorithm, name: `p${r}` } as const;
        for (const [i, cost] of costs.entries()) {
          const capacity = definePolicy(p).capacity;
          if (cost > capacity) continue;
          clock.now += (i * 37) % 101;
          // Spend until denied, then check the wait it names.
          let d = await limiter.consume('bob', p, { cost });
          while (d.allowed) d = await limiter.consume('bob', p, { cost });
          const wait = only(d).retryAfterMs;
          expect(wait).toBeGreaterThan(0);
          expect(Number.isInteger(wait)).toBe(true);
          clock.now += wait - 1;
          expect((await limiter.consume('bob', p, { cost })).allowed).toBe(false);
          clock.now += 1;
          expect((await limiter.consume('bob', p, { cost })).allowed).toBe(true);
        }
      }
    });

    it('a denied request changes no state: limit 10, spend 7, cost 5 denied, cost 3 admitted', async () => {
      const { limiter } = setup(kind);
      const p = { rate: '10/m', algorithm } as const;
      expect((await limiter.consume('carol', p, { cost: 7 })).allowed).toBe(true);
      const denied = await limiter.consume('carol', p, { cost: 5 });
      expect(denied.allowed).toBe(false);
      expect(only(denied).remaining).toBe(3);
      const admitted = await limiter.consume('carol', p, { cost: 3 });
      expect(admitted.allowed).toBe(true);
      expect(only(admitted).remaining).toBe(0);
    });

    it('cost 0 never writes', async () => {
      const { limiter, fixture, keyOf } = setup(kind);
      const p = { rate: '10/m', algorithm } as const;
      const d = await limiter.consume('dave', p, { cost: 0 });
      expect(only(d)).toEqual({
        name: 'default',
        allowed: true,
        limit: 10,
        remaining: 10,
        resetMs: 0,
        retryAfterMs: 0,
      });
      expect(await fixture.pttl(keyOf('dave', p))).toBe(-2);
      await limiter.consume('dave', p, { cost: 4 });
      const ttl = await fixture.pttl(keyOf('dave', p));
      const peeked = await limiter.peek('dave', p);
      expect(only(peeked).remaining).toBe(6);
      expect(await fixture.pttl(keyOf('dave', p))).toBeLessThanOrEqual(ttl);
      expect(only(await limiter.consume('dave', p, { cost: 1 })).remaining).toBe(5);
    });

    it('a cost above capacity is denied with Infinity and leaves no state', async () => {
      const { limiter, fixture, keyOf } = setup(kind);
      const p = { rate: '10/m', algorithm } as const;
      const d = await limiter.consume('erin', p, { cost: 11 });
      expect(d).toEqual({
        allowed: false,
        reason: 'cost_exceeds_limit',
        policies: [
          {
            name: 'default',
            allowed: false,
            limit: 10,
            remaining: 10,
            resetMs: 0,
            retryAfterMs: Infinity,
          },
        ],
      });
      expect(await fixture.pttl(keyOf('erin', p))).toBe(-2);
    });

    it('every key carries a TTL after every call', async () => {
      const { clock, limiter, fixture, keyOf } = setup(kind);
      const policies = [
        { name: 'fast', rate: '1000/s', algorithm },
        { name: 'odd', rate: '7/13s', algorithm },
        // A sliding log holds at most 10,000 entries (ERR_RATE_LIMIT_LOG_SIZE).
        { name: 'day', rate: algorithm === 'sliding-log' ? '10000/d' : '100000/d', algorithm },
      ] as const;
      for (let i = 0; i < 40; i++) {
        await limiter.consume('frank', policies, { cost: 1 + (i % 3) });
        for (const p of policies) {
          const ttl = await fixture.pttl(keyOf('frank', p));
          // -2 or 0: the key expired already in Redis' own time (1000/s refills in 1 ms).
          // Never -1: a key without a TTL.
          expect(ttl).toBeGreaterThanOrEqual(-2);
          expect(ttl).not.toBe(-1);
        }
        clock.now += (i * 7) % 5;
      }
    });

    it.each(['3/s', '1000/s', '7/13s'])(
      'fractional rate %s loses nothing over a long sequence',
      async (rate) => {
        const { clock, limiter } = setup(kind);
        const p = definePolicy({ rate, algorithm });
        // About 3000 admissions at most, so a Redis run stays short.
        const periods = Math.max(3, Math.min(40, Math.floor(3000 / p.limit)));
        const horizon = periods * p.periodMs + 123;
        const start = clock.now;
        // A greedy client: spends the whole capacity at once, then retries exactly when told
        // to. (Draining in one call also keeps every TTL long: Redis expires keys on its own
        // clock while the injected one stands still, so a 1 ms TTL could lapse mid-test.)
        const greedy = async (
          consume: (
            now: number,
            cost: number,
          ) => Promise<{ allowed: boolean; retryAfterMs: number }>,
        ) => {
          let admitted = 0;
          let cost = p.capacity;
          for (let now = start; now <= start + horizon;) {
            const o = await consume(now, cost);
            if (o.allowed) admitted += cost;
            else now += o.retryAfterMs;
            cost = 1;
          }
          return admitted;
        };
        // The pure reference, in exact integer arithmetic.
        const evaluate = (state: State | undefined, now: number, cost: number) =>
          ALGORITHM_IMPLS[algorithm].evaluate(state, now, { ...p, cost });
        let state: State | undefined;
        const reference = await greedy((now, cost) => {
          const o = evaluate(state, now, cost);
          state = o.state ?? state;
          return Promise.resolve(o);
        });
        if (algorithm === 'fixed-window' || algorithm === 'sliding-log') {
          // Back-to-back windows of one period each (the greedy client spends the whole log
          // at once, so all of it expires at once).
          expect(reference).toBe(p.limit * (periods + 1));
        } else if (algorithm === 'sliding-window') {
          // Never more than the limit per window, and the estimate never runs ahead.
          expect(reference).toBeLessThanOrEqual(p.limit * (periods + 1));
          expect(reference).toBeGreaterThanOrEqual((p.limit - 1) * periods);
        } else {
          // A full bucket, then one unit per emission interval, exactly.
          expect(reference).toBe(p.capacity + Math.floor((horizon * p.limit) / p.periodMs));
        }
        // The same client against the store, which must answer every step as the reference
        // does from the same state. Redis expires a key on its own real clock while the
        // injected one stands still: once the real time since a write reaches its TTL (a busy
        // machine stalling the test for a second), the state may be gone, and then the answer
        // must be the reference's from no state.
        let expected: State | undefined;
        let written: { sentAt: number; ttlMs: number } | undefined;
        let dropped = 0;
        const admitted = await greedy(async (now, cost) => {
          clock.now = now;
          const sentAt = performance.now();
          const got = only(await limiter.consume('hank', p, { cost }));
          let want = evaluate(expected, now, cost);
          if (
            written &&
            countedDown(kind, written.sentAt) >= written.ttlMs &&
            !sameAnswer(got, want)
          ) {
            want = evaluate(undefined, now, cost);
            dropped++;
          }
          expect(answer(got)).toEqual(answer(want));
          if (want.state) {
            expected = want.state;
            written = { sentAt, ttlMs: want.ttlMs ?? want.resetMs };
          }
          return got;
        });
        // Every step the same, so the same total, unless Redis dropped a state on the way.
        expect(dropped === 0 ? admitted : reference).toBe(reference);
      },
    );
  });

  describe('stacked policies', () => {
    const policies = [
      { name: 'burst', rate: '1/s' },
      { name: 'minute', rate: '60/m' },
    ] as const;

    it.each(ALGORITHMS)('%s: a request denied by 1/s spends nothing of 60/m', async (algorithm) => {
      const { clock, limiter } = setup(kind);
      const stack = policies.map((p) => ({ ...p, algorithm }));
      const first = await limiter.consume('ivan', stack);
      expect(first.allowed).toBe(true);
      expect(first.policies.map((p) => p.remaining)).toEqual([0, 59]);
      for (let i = 0; i < 5; i++) {
        const d = await limiter.consume('ivan', stack);
        expect(d.allowed).toBe(false);
        expect(d.reason).toBe('limit_exceeded');
        expect(d.policies.map((p) => [p.name, p.allowed, p.remaining])).toEqual([
          ['burst', false, 0],
          ['minute', true, 59],
        ]);
        expect(d.policies[1]!.retryAfterMs).toBe(0);
      }
      clock.now += d0RetryAfter(algorithm);
      const later = await limiter.consume('ivan', stack);
      expect(later.allowed).toBe(true);
      // 60/m refills one unit per second under token-bucket and gcra; the windows do not.
      const refilled = algorithm === 'token-bucket' || algorithm === 'gcra' ? 1 : 0;
      expect(later.policies[1]!.remaining).toBe(58 + refilled);
    });

    it('a denial by the larger policy spends nothing of the smaller one either', async () => {
      const { clock, limiter } = setup(kind);
      const stack = [
        { name: 'burst', rate: '5/s' },
        { name: 'daily', rate: '3/d' },
      ] as const;
      for (let i = 0; i < 3; i++) {
        expect((await limiter.consume('judy', stack)).allowed).toBe(true);
        clock.now += 1000;
      }
      const d = await limiter.consume('judy', stack);
      expect(d.policies.map((p) => [p.name, p.allowed, p.remaining])).toEqual([
        ['burst', true, 5],
        ['daily', false, 0],
      ]);
    });
  });

  describe('edge cases: clocks that step back, lowered limits, key TTLs', () => {
    it.each(['token-bucket', 'gcra'] as const)(
      '%s: a clock that steps back refills nothing twice (10/s: 5 at T, 1 at T-500 denied, 5 at T)',
      async (algorithm) => {
        const { clock, limiter } = setup(kind);
        const p = { rate: '10/s', algorithm } as const;
        const T = clock.now;
        expect((await limiter.consume('kai', p, { cost: 5 })).allowed).toBe(true);
        clock.now = T - 500;
        expect((await limiter.consume('kai', p, { cost: 1 })).allowed).toBe(false);
        clock.now = T;
        expect((await limiter.consume('kai', p, { cost: 5 })).allowed).toBe(true);
        expect((await limiter.consume('kai', p, { cost: 1 })).allowed).toBe(false);
      },
    );

    // Regression (second review): a 1 ms step back read a fresh window as foreign state.
    it('fixed-window: a clock that steps back within a period keeps the window', async () => {
      const { clock, limiter } = setup(kind);
      const p = { rate: '10/s', algorithm: 'fixed-window' } as const;
      const T = clock.now;
      expect((await limiter.consume('lee', p, { cost: 10 })).allowed).toBe(true);
      clock.now = T - 1;
      expect((await limiter.consume('lee', p)).allowed).toBe(false);
      clock.now = T - 999;
      expect((await limiter.consume('lee', p)).allowed).toBe(false);
    });

    it('sliding-window: a clock that steps back across a window boundary keeps the newer window', async () => {
      const { clock, limiter } = setup(kind);
      const p = { rate: '10/s', algorithm: 'sliding-window' } as const;
      const T = clock.now; // a window boundary
      expect((await limiter.consume('lou', p, { cost: 10 })).allowed).toBe(true);
      clock.now = T - 1;
      const back = await limiter.consume('lou', p, { cost: 10 });
      expect(back.allowed).toBe(false);
      clock.now = T + 1;
      expect((await limiter.consume('lou', p, { cost: 10 })).allowed).toBe(false);
    });

    it.each(ALGORITHMS)(
      '%s: a peek over a lowered limit is admitted and writes nothing',
      async (algorithm) => {
        const { clock, limiter, fixture, keyOf } = setup(kind);
        const before = { rate: '10/h', algorithm } as const;
        await limiter.consume('mo', before, { cost: 8 });
        clock.now += 10;
        const raw = await fixture.raw(keyOf('mo', before));
        const lowered = { rate: '5/h', algorithm } as const;
        const d = await limiter.peek('mo', lowered);
        expect(d.allowed).toBe(true);
        // The windows count requests (8 > 5: none left); token bucket and GCRA keep their
        // debt in time, 8 × 6 min, which leaves room for 1 at 5/h.
        const left = {
          'fixed-window': 0,
          'sliding-window': 0,
          'sliding-log': 0,
          'token-bucket': 1,
          gcra: 1,
        }[algorithm];
        expect(only(d).remaining).toBe(left);
        expect(await fixture.raw(keyOf('mo', before))).toBe(raw);
      },
    );

    it.each(ALGORITHMS)(
      '%s: the TTL of a written key is exactly the time its state matters',
      async (algorithm) => {
        const { clock, limiter, fixture, keyOf } = setup(kind);
        const p = { rate: '7/13s', algorithm } as const;
        for (const [cost, wait] of [
          [3, 0],
          [2, 1700],
          [1, 40],
        ] as const) {
          clock.now += wait;
          const sent = performance.now();
          const d = only(await limiter.consume('ned', p, { cost }));
          expect(d.allowed).toBe(true);
          // resetMs is when the state is back to full: the key must live exactly that long,
          // less what a Redis that expires in real time has counted down since the call.
          const ttl = await fixture.pttl(keyOf('ned', p));
          expect(ttl).toBeLessThanOrEqual(d.resetMs);
          expect(ttl).toBeGreaterThanOrEqual(d.resetMs - countedDown(kind, sent));
        }
      },
    );

    it('policies of different identities are all-or-nothing too (per-IP 100/h + per-user 1/h)', async () => {
      const { limiter } = setup(kind);
      const ip = { name: 'ip', rate: '100/h' } as const;
      const user = { name: 'user', rate: '1/d' } as const;
      const request = [
        { identity: 'ip:203.0.113.7', policy: ip },
        { identity: 'user:pat', policy: user },
      ];
      expect((await limiter.consumeEach(request)).allowed).toBe(true);
      for (let i = 0; i < 5; i++) {
        const d = await limiter.consumeEach(request);
        expect(d.allowed).toBe(false);
        expect(d.policies.map((p) => [p.name, p.allowed])).toEqual([
          ['ip', true],
          ['user', false],
        ]);
        // The wait is the day policy's, not the hour's.
        expect(d.policies[1]!.retryAfterMs).toBe(86_400_000);
      }
      expect(only(await limiter.peek('ip:203.0.113.7', ip)).remaining).toBe(99);
    });

    it('accepts a Policy built by resolvePolicy or written as a literal, at request time', async () => {
      const { limiter } = setup(kind);
      const literal = {
        name: 'lit',
        limit: 2,
        periodMs: 60_000,
        algorithm: 'gcra',
        capacity: 2,
      } as const;
      expect((await limiter.consume('oli', resolvePolicy({ rate: '2/m' }))).allowed).toBe(true);
      expect(only(await limiter.consume('oli', literal)).remaining).toBe(1);
    });
  });

  describe('reset', () => {
    it('forgets one scope, or every scope, of one identity only', async () => {
      const { limiter } = setup(kind);
      const p = { rate: '2/m' } as const;
      for (const id of ['kim', 'lee']) {
        for (const scope of ['a', 'b']) await limiter.consume(id, p, { scope, cost: 2 });
      }
      const spent = async (id: string, scope: string) =>
        only(await limiter.peek(id, p, { scope })).remaining;
      await limiter.reset('kim', 'a');
      expect([await spent('kim', 'a'), await spent('kim', 'b'), await spent('lee', 'a')]).toEqual([
        2, 0, 0,
      ]);
      expect(await limiter.reset('kim')).toBe(1);
      expect([await spent('kim', 'b'), await spent('lee', 'b')]).toEqual([2, 0]);
    });
  });
}

/** How long `1/s` makes the second request wait, per algorithm, after one at time 0. */
function d0RetryAfter(algorithm: Algorithm): number {
  return algorithm === 'sliding-window' ? 2000 : 1000;
}
