/** The plans API-key clients can be on. */
export type Plan = 'free' | 'pro';

/** Requests per minute of each plan on `/api/items`. */
export const PLAN_RATES: Record<Plan, string> = { free: '10/m', pro: '100/m' };

// Stands in for the API-key table of a real app.
const API_KEYS = new Map<string, Plan>([
  ['free-key-1', 'free'],
  ['pro-key-1', 'pro'],
]);

// Keys shaped `<plan>-key-<id>` are accepted too, so that `npm run demo` can mint fresh
// keys on every run and start from a full budget, even on a Redis that remembers the last.
const MINTED = /^(free|pro)-key-[A-Za-z0-9-]{1,64}$/;

/**
 * The plan of an API key, or undefined for a missing or unknown key.
 * @param apiKey the `x-api-key` header (Node gives a string, or an array when repeated)
 */
export function planOf(apiKey: string | string[] | undefined): Plan | undefined {
  const key = Array.isArray(apiKey) ? apiKey[0] : apiKey;
  if (!key) return undefined;
  return API_KEYS.get(key) ?? (MINTED.exec(key)?.[1] as Plan | undefined);
}
