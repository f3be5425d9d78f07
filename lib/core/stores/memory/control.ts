import { ALGORITHM_IMPLS } from '../../algorithms/index.js';
import { applicableOverride } from '../../operator/control.js';
import { scopeAndNameOf } from '../../model/store-keys.js';
import type { ControlChange, ControlSnapshot, StorePolicy } from '../store.js';

/** What an identity's control hash does to one policy of a request (see CONSUME_SCRIPT). */
export interface ControlEffect {
  /** The policy as evaluated: cost 0 when exempt; an override's rate and own state key. */
  params: StorePolicy;
  exempt?: true;
  override?: { limit: number; periodMs: number };
  /** When the override ends, in ms on the store's clock. */
  untilMs?: number;
}

/**
 * Overrides and exemptions, as the Redis script applies them, for MemoryStore: `control` is
 * the identity's live control fields, if any.
 */
export function controlEffect(
  policy: StorePolicy,
  control: ReadonlyMap<string, string> | undefined,
  now: number,
): ControlEffect {
  if (!control) return { params: policy };
  const { key } = policy;
  const fields = Object.fromEntries(control);
  const until = /^\d{1,16}$/.test(fields.exempt ?? '') ? Number(fields.exempt) : NaN;
  if (Number.isSafeInteger(until) && until > now) {
    return { params: { ...policy, cost: 0 }, exempt: true };
  }
  // Overrides change rates; a concurrency limit has none (see concurrency.ts).
  if (policy.lease !== undefined || policy.algorithm === 'concurrency') return { params: policy };
  const [scope, name] = scopeAndNameOf(key.slice(key.indexOf('}') + 2));
  const found = applicableOverride(fields, now, scope, name);
  if (!found) return { params: policy };
  const { limit, periodMs } = found;
  // A burst means something only to a debt (token bucket, GCRA), as in the control script.
  const debt = ALGORITHM_IMPLS[policy.algorithm].lua.kind === 'debt';
  const capacity = debt ? (found.burst ?? limit) : limit;
  // Each override runs on state of its own (see CONSUME_SCRIPT).
  const untilMs = now + found.expiresInMs;
  return {
    params: { ...policy, key: `${key}:o${untilMs}`, limit, periodMs, capacity },
    override: { limit, periodMs },
    untilMs,
  };
}

/** MemoryStore's control hashes (overrides, exemptions), by key. */
export type Controls = Map<string, { fields: Map<string, string>; expiresAt: number }>;

/** Same semantics as the Redis control script (see `RateLimitStore.control`), at `nowMs`. */
export function changeControl(
  controls: Controls,
  key: string,
  change: ControlChange,
  nowMs: number,
): ControlSnapshot {
  let control = controls.get(key);
  if (control && control.expiresAt <= nowMs) {
    controls.delete(key);
    control = undefined;
  }
  let removed = false;
  if (change.op !== 'get' && control) {
    for (const [field, value] of control.fields) {
      if (field.startsWith('r:')) continue;
      const until = Number(/^\d+/.exec(value)?.[0]);
      if (!(until > nowMs)) {
        control.fields.delete(field);
        control.fields.delete(`r:${field}`);
      }
    }
  }
  if (change.op === 'set') {
    const untilMs = nowMs + change.ttlMs;
    control ??= { fields: new Map(), expiresAt: 0 };
    control.fields.set(change.field, change.value ? `${untilMs}:${change.value}` : `${untilMs}`);
    control.fields.set(`r:${change.field}`, change.reason);
    control.expiresAt = Math.max(control.expiresAt, untilMs);
    controls.set(key, control);
  } else if (change.op === 'remove' && control) {
    removed = control.fields.delete(change.field);
    control.fields.delete(`r:${change.field}`);
  }
  if (control && control.fields.size === 0) controls.delete(key);
  return {
    nowMs,
    fields: Object.fromEntries(control?.fields ?? []),
    ...(change.op === 'remove' && { removed }),
  };
}
