import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  evaluateGcra,
  evaluateTokenBucket,
  type Evaluate,
  type State,
} from '../../lib/core/algorithms/index.js';
import { scenarios, type Scenario } from '../conformance/sequences.js';

/** Runs a scenario through one algorithm, state carried as a store would carry it. */
function replay(evaluate: Evaluate, s: Scenario) {
  let now = 1_800_000_000_000;
  let state: State | undefined;
  let expiresAt = 0;
  const capacity = s.burst ?? s.limit;
  return s.steps.map(({ waitMs, cost }) => {
    now += waitMs;
    if (now >= expiresAt) state = undefined;
    const o = evaluate(state, now, { limit: s.limit, periodMs: s.periodMs, capacity, cost });
    if (o.state) {
      state = o.state;
      expiresAt = now + o.ttlMs!;
    }
    return [o.allowed, o.remaining, o.resetMs, o.retryAfterMs];
  });
}

describe('token-bucket and gcra are one policy stored two ways', () => {
  it('give identical decisions, remaining, resetMs and retryAfterMs for any request sequence, clock steps back included', () => {
    fc.assert(
      fc.property(scenarios(200, 0, true), (s) => {
        expect(replay(evaluateGcra, s)).toEqual(replay(evaluateTokenBucket, s));
      }),
      { numRuns: 2000 },
    );
  });

  it('agree on the case a float implementation gets wrong: 3/s, three at once, retry at 333.33 ms', () => {
    const s: Scenario = {
      limit: 3,
      periodMs: 1000,
      burst: undefined,
      steps: [
        { waitMs: 0, cost: 3 },
        { waitMs: 333, cost: 1 },
        { waitMs: 1, cost: 1 },
      ],
    };
    const expected = [
      [true, 0, 1000, 0],
      [false, 0, 667, 1],
      [true, 0, 1000, 0],
    ];
    expect(replay(evaluateTokenBucket, s)).toEqual(expected);
    expect(replay(evaluateGcra, s)).toEqual(expected);
  });
});
