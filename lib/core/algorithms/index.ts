import { concurrency } from './concurrency.js';
import { fixedWindow } from './fixed-window.js';
import { gcra } from './gcra.js';
import { slidingLog } from './sliding-log.js';
import { slidingWindow } from './sliding-window.js';
import { tokenBucket } from './token-bucket.js';
import { blockedOutcome } from '../model/penalty.js';
import type { AlgorithmImpl, AlgorithmParams, Outcome, PolicyAlgorithm, State } from './types.js';

export type { AlgorithmImpl, Evaluate, Outcome, State } from './types.js';
export { evaluateGcra } from './gcra.js';
export { evaluateTokenBucket } from './token-bucket.js';

/**
 * Every algorithm by name, and concurrency limits (see `concurrency.ts`): what both stores
 * run. RedisStore's scripts also give each its code (`stores/redis/lua/protocol.ts`).
 */
export const ALGORITHM_IMPLS: Readonly<Record<PolicyAlgorithm, AlgorithmImpl>> = {
  'fixed-window': fixedWindow,
  'sliding-window': slidingWindow,
  'sliding-log': slidingLog,
  'token-bucket': tokenBucket,
  gcra,
  concurrency,
};

/** One policy's part in an all-or-nothing decision. */
export interface Evaluation {
  readonly impl: AlgorithmImpl;
  /** The time the state is read at, in ms (RedisStore gives GCRA a state relative to 0). */
  readonly now: number;
  readonly state: State | undefined;
  readonly params: AlgorithmParams;
}

/**
 * Decides stacked policies all-or-nothing: admitted only if every policy
 * admits. On a denial nothing is spent, so the policies that would have admitted are
 * reported as they stand (evaluated again at cost 0) and carry no new state.
 * The Lua script in `stores/redis/lua/consume.ts` commits by the same rule.
 *
 * @param blocked per policy, the **ms** left of a block in force (see `penalty.ts`), if any:
 *   such a policy refuses whatever its state
 */
export function decideAll(
  evaluations: readonly Evaluation[],
  blocked?: readonly (number | undefined)[],
): Outcome[] {
  const outcomes = evaluations.map((e, i) => {
    const outcome = e.impl.evaluate(e.state, e.now, e.params);
    const left = blocked?.[i];
    return left === undefined ? outcome : blockedOutcome(outcome, left);
  });
  if (outcomes.every((o) => o.allowed)) return outcomes;
  return outcomes.map((o, i) => {
    if (!o.allowed) return o;
    const e = evaluations[i]!;
    return e.impl.evaluate(e.state, e.now, { ...e.params, cost: 0 });
  });
}
