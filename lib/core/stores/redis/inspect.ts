import { ALGORITHM_IMPLS } from '../../algorithms/index.js';
import { slidingWindow, unpackCounts } from '../../algorithms/sliding-window.js';
import { decodeInts, type LuaForm } from '../../algorithms/types.js';
import { algorithmTagOf, baseKeyOf } from '../../model/store-keys.js';
import { pairsToRecord } from './scripting.js';
import type { StoredKey, StoreSnapshot } from '../store.js';

/** What INSPECT_SCRIPT answers: `now`, then per key its PTTL and its value. */
export type InspectReply = (number | string | string[] | null)[];

/**
 * The snapshot of an INSPECT_SCRIPT reply over `keys` (see `RedisStore.inspect`).
 * @param testClock the store runs on a test clock (token bucket and GCRA keep their debt in
 *   the value then, and blocks their end)
 */
export function snapshotOf(
  keys: readonly string[],
  reply: InspectReply,
  testClock: boolean,
): StoreSnapshot {
  const nowMs = reply[0] as number;
  const found: StoredKey[] = [];
  keys.forEach((key, i) => {
    const ttlMs = reply[2 * i + 1] as number;
    const value = reply[2 * i + 2] ?? null;
    if (ttlMs === -2 || value === null) return; // gone since it was found
    if (Array.isArray(value) && algorithmTagOf(key) === 'cc') {
      // A concurrency limit's leases: their expiries (the scores), as MemoryStore gives them.
      const expiries = value.filter((_, k) => k % 2 === 1).map(Number);
      found.push({ key, ttlMs, state: expiries.filter((end) => end > nowMs) });
      return;
    }
    if (Array.isArray(value)) {
      found.push({ key, ttlMs, fields: pairsToRecord(value) });
      return;
    }
    const state = decodeStored(key, ttlMs, String(value), nowMs, testClock);
    if (state !== null) found.push({ key, ttlMs, state });
  });
  return { nowMs, keys: found };
}

/** How each algorithm's state is stored, by the key's algorithm tag. */
const LUA_BY_TAG = new Map<string, LuaForm>(
  Object.values(ALGORITHM_IMPLS).map((impl) => [impl.tag, impl.lua]),
);

/**
 * A stored value as {@link StoredKey.state} describes it, by the key's algorithm tag;
 * null for a state that a test clock has moved past its expiry.
 */
function decodeStored(
  key: string,
  ttlMs: number,
  value: string,
  nowMs: number,
  testClock: boolean,
): readonly number[] | undefined | null {
  const tag = algorithmTagOf(key);
  // A block (see penalty.ts): its end, held by the value on a test clock, else the expiry.
  if (tag === 'b') return testClock ? decodeInts(value, 1) : [nowMs + ttlMs];
  const lua = LUA_BY_TAG.get(tag);
  if (lua?.kind === 'value') {
    const state = lua.decode(value);
    // The sliding window's packed form (its counts; the window the expiry's), which only
    // its base key takes, on the server clock.
    if (state !== undefined || tag !== slidingWindow.tag || testClock || baseKeyOf(key) !== key)
      return state;
    return ttlMs > 0 ? unpackCounts(value) : undefined;
  }
  if (lua?.kind === 'counter') {
    // A test clock's or an override's window: "<count>:<windowEndMs>"; else the count, the
    // window ending with the key.
    if (testClock || baseKeyOf(key) !== key) return decodeInts(value, 2);
    const count = Number(value);
    return Number.isSafeInteger(count) && ttlMs > 0 ? [count, nowMs + ttlMs] : undefined;
  }
  if (lua?.kind !== 'debt') return undefined;
  if (testClock || baseKeyOf(key) !== key) {
    // A test clock, or an override's own state (which expires with the override):
    // "<expiryMs>:<credit>", the expiry on the store's clock (null: expired on it).
    const [expiry, credit] = value.split(':').map(Number);
    if (!Number.isSafeInteger(expiry)) return [0, 0];
    if (expiry! <= nowMs) return null;
    return [expiry! - nowMs, -(Number.isSafeInteger(credit) ? credit! : 0)];
  }
  // The expiry is the TAT rounded up to the ms; the value the ticks that rounding added.
  if (ttlMs < 0) return [0, 0];
  const credit = Number(value);
  return [ttlMs, Number.isSafeInteger(credit) ? -credit : 0];
}
