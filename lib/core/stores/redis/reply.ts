import { ALGORITHM_IMPLS, decideAll, type State } from '../../algorithms/index.js';
import type { LuaForm } from '../../algorithms/types.js';
import { blockedOutcome, startsBlock } from '../../model/penalty.js';
import { spentOutcome } from '../../model/refund.js';
import type { StoreOutcome, StorePolicy } from '../store.js';
import { MODES, type Mode } from './lua/protocol.js';

// How RedisStore reads what its scripts reply (see CONSUME_SCRIPT and INSPECT_SCRIPT).

/**
 * See `CONSUME_SCRIPT`: one policy's state as one integer, or states as they stood (in mode
 * `m`, then each fixed-window policy's window end in ms).
 */
export type ScriptReply = number | (number | string | null)[];

/**
 * The outcomes of one consume script call, computed by the TypeScript reference from the
 * states the script replied (see CONSUME_SCRIPT).
 * @param clock the store's test clock, if any
 */
export function outcomesOf(
  policies: readonly StorePolicy[],
  reply: ScriptReply,
  mode: Mode,
  clock: (() => number) | undefined,
): StoreOutcome[] {
  // The script returns each state as it stood; the TypeScript reference turns it into the
  // numbers reported, deciding exactly as the script did (test/integration/lua-reference).
  const only = policies.length === 1 ? policies[0]! : undefined;
  // Token bucket and GCRA are read at time 0 (a debt): their TAT counts from now.
  const offset = clock ?? Date.now;
  // A fixed window is read at time 0 too; a refund finds its window by its end on the server
  // clock, which the script replies last in mode `m`, one per fixed window (see
  // WINDOW_END_LUA): its mark is that end.
  const ends = new Map<StorePolicy, number>();
  if (mode === MODES.marked && Array.isArray(reply)) {
    const counters = policies.filter((p) => ALGORITHM_IMPLS[p.algorithm].lua.kind === 'counter');
    const all = reply;
    const rest = all.slice(0, all.length - counters.length);
    counters.forEach((p, k) => ends.set(p, all[rest.length + k] as number));
    reply = rest.length === 1 && typeof rest[0] === 'number' ? rest[0] : rest;
  }
  if (typeof reply === 'number' && only !== undefined && only.blockMs === undefined) {
    // The usual request: one policy's state as one integer, no control, no penalty (held to
    // the general path's outcomes by test/unit/fast-paths.test.ts).
    const impl = ALGORITHM_IMPLS[only.algorithm];
    const [state, now] = loneState(impl.lua.kind, reply, only);
    return [spentOutcome(impl.evaluate(state, now, only), only, offset, ends.get(only))];
  }
  const values = typeof reply === 'number' ? [reply] : reply;
  let r = 0;
  const evaluations = policies.map((policy) => {
    const impl = ALGORITHM_IMPLS[policy.algorithm];
    const { lua } = impl;
    if (lua.kind === 'debt') {
      // A debt in ticks, as a GCRA state read at time 0.
      const debt = values[r++] as number;
      const state: State = [Math.floor(debt / policy.limit), debt % policy.limit];
      return { impl, params: policy, now: 0, state, debt };
    }
    if (lua.kind === 'leases' || lua.kind === 'counter') {
      // Read at time 0: leases held and ms until the last expires (see concurrency.ts); a
      // fixed window's count and ms left (see fixed-window.ts).
      const state: State = [values[r++] as number, values[r++] as number];
      return { impl, params: policy, now: 0, state, debt: undefined };
    }
    const raw = values[r++] as string | null;
    const now = values[r++] as number;
    const state = raw === null ? undefined : lua.decode(raw);
    return { impl, params: policy, now, state, debt: undefined };
  });
  // Overrides and exemptions the script applied, if any (see CONSUME_SCRIPT).
  const effects = values.length > r ? (values.slice(r) as string[]) : undefined;
  const controlled = effects
    ? evaluations.map((e, i) => {
        const effect = effects[i] ?? '';
        if (effect === '' || effect.startsWith('b')) return e;
        const params = effect === 'x' ? { ...e.params, cost: 0 } : overridden(e.params, effect);
        const state =
          e.debt === undefined
            ? e.state
            : ([Math.floor(e.debt / params.limit), e.debt % params.limit] as State);
        return { ...e, params, state };
      })
    : evaluations;
  // Blocks in force, with their ms left (see penalty.ts).
  const blocks = effects?.map((e) => (e.startsWith('b') ? Number(e.slice(1)) : undefined));
  return decideAll(controlled, blocks).map((o, i) => {
    const { allowed, remaining, resetMs, retryAfterMs } = o;
    const outcome: StoreOutcome = { allowed, remaining, resetMs, retryAfterMs };
    const effect = effects?.[i] ?? '';
    const policy = policies[i]!;
    if (blocks?.[i] !== undefined) return { ...outcome, blocked: true };
    if (mode !== MODES.decide && startsBlock(policy, o, undefined, effect !== '')) {
      return { ...blockedOutcome(o, policy.blockMs!, policy.blockResets), blocked: true };
    }
    // A mark only for a spending the caller may refund (RateLimiter.spend): others pay nothing.
    if (effect === '') return spentOutcome(o, policy, offset, ends.get(policy));
    if (effect === 'x') return { ...outcome, exempt: true };
    const { limit, periodMs } = controlled[i]!.params;
    return { ...outcome, override: { limit, periodMs } };
  });
}

/**
 * A lone policy's state replied as one integer (see `lonePath`, lua/lone.ts) and the time it
 * is read at: a token bucket or GCRA debt in ticks, or a fixed window's count and ms left,
 * read at time 0; a sliding window's two counts in a window that began at 0, read at the ms
 * `now` was into it (its mark, the window's index, is in the general reply only: a request
 * that may be refunded is sent in mode `m`, which takes no lone path).
 */
function loneState(kind: LuaForm['kind'], packed: number, p: StorePolicy): [State, number] {
  if (kind === 'debt') return [[Math.floor(packed / p.limit), packed % p.limit], 0];
  if (kind === 'counter') {
    const span = 2 * p.periodMs + 1;
    return [[Math.floor(packed / span), packed % span], 0];
  }
  const elapsed = packed % p.periodMs;
  const counts = (packed - elapsed) / p.periodMs;
  const base = p.limit + 1;
  return [[0, counts % base, Math.floor(counts / base)], elapsed];
}

/** A policy's parameters under an override reported as `"<limit>:<periodMs>:<capacity>"`. */
function overridden(params: StorePolicy, effect: string): StorePolicy {
  const [limit, periodMs, capacity] = effect.split(':').map(Number);
  return { ...params, limit: limit!, periodMs: periodMs!, capacity: capacity! };
}
