import { applicableOverride } from '../control.js';
import type { StorePolicy } from './store.js';

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
  const [scope = '', name = ''] = key.slice(key.indexOf('}') + 2).split(':');
  const found = applicableOverride(fields, now, scope, name);
  if (!found) return { params: policy };
  const { limit, periodMs } = found;
  const window = policy.algorithm === 'fixed-window' || policy.algorithm === 'sliding-window';
  const capacity = window ? limit : (found.burst ?? limit);
  // Each override runs on state of its own (see CONSUME_SCRIPT).
  const untilMs = now + found.expiresInMs;
  return {
    params: { ...policy, key: `${key}:o${untilMs}`, limit, periodMs, capacity },
    override: { limit, periodMs },
    untilMs,
  };
}
