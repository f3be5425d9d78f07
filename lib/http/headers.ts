import type { PolicyDecision } from '../core/policy.js';

/** A policy's verdict with its window, as the headers need it. Durations in ms. */
export interface HeaderPolicy extends PolicyDecision {
  /** The policy's period in **ms**; sent as `w` in whole seconds. */
  readonly periodMs: number;
  /**
   * The draft's quota unit, when not requests per window: `concurrent-requests` for a
   * concurrency limit (sent as `qu`, without `w`: it has no window).
   */
  readonly quotaUnit?: 'concurrent-requests';
}

/** Which headers to send (DESIGN §7). */
export interface HeaderOptions {
  /** `X-RateLimit-Limit`, `-Remaining`, `-Reset`. Default true. */
  legacy?: boolean;
  /** `RateLimit` / `RateLimit-Policy` of draft-ietf-httpapi-ratelimit-headers-10. Default `'draft-10'`. */
  standard?: 'draft-10' | false;
}

/** ms to whole seconds, rounded up: what every header carries. */
export function toSeconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/**
 * `Retry-After` in seconds (RFC 9110 §10.2.3) for a denied request: the longest finite
 * wait among the denying policies, at least 1. Undefined when no wait would help
 * (the cost exceeds a policy's capacity).
 */
export function retryAfterSeconds(policies: readonly PolicyDecision[]): number | undefined {
  const waits = policies.filter((p) => !p.allowed).map((p) => p.retryAfterMs);
  if (waits.length === 0 || waits.some((w) => w === Infinity)) return undefined;
  return Math.max(1, toSeconds(Math.max(...waits)));
}

/** What a policy shows: a denying policy has nothing left until its retry-after. */
/** The remaining and reset a policy shows: a denied policy shows 0 left until its wait ends. */
function shownRemaining(p: HeaderPolicy): number {
  return p.allowed || p.retryAfterMs === Infinity ? p.remaining : 0;
}

function shownResetS(p: HeaderPolicy): number {
  return p.allowed || p.retryAfterMs === Infinity
    ? toSeconds(p.resetMs)
    : Math.max(1, toSeconds(p.retryAfterMs));
}

/**
 * Legacy headers of the most restrictive policy (lowest remaining; ties: longest reset),
 * added to `out`. They speak of requests per window: an admitting concurrency limit is left
 * out beside rates (its reset would be its lease, not when a slot frees).
 */
export function legacyHeaders(
  policies: readonly HeaderPolicy[],
  out: Record<string, string> = {},
): Record<string, string> {
  let best: HeaderPolicy | undefined;
  let bestRemaining = 0;
  let bestReset = 0;
  let rates = false;
  for (const p of policies) if (p.quotaUnit === undefined) rates = true;
  for (const p of policies) {
    if (rates && p.quotaUnit !== undefined && p.allowed) continue;
    const remaining = shownRemaining(p);
    const reset = shownResetS(p);
    if (!best || remaining < bestRemaining || (remaining === bestRemaining && reset > bestReset)) {
      best = p;
      bestRemaining = remaining;
      bestReset = reset;
    }
  }
  if (!best) return out;
  out['X-RateLimit-Limit'] = String(best.limit);
  out['X-RateLimit-Remaining'] = String(bestRemaining);
  out['X-RateLimit-Reset'] = String(bestReset);
  return out;
}

interface PolicyItem {
  readonly limit: number;
  readonly periodMs: number;
  readonly unit: string | undefined;
  readonly item: string;
}

/**
 * The `RateLimit-Policy` items made per policy name, reused while the quota holds: up to 32
 * per name, since routes, plans and overrides give one name (`default`) several quotas.
 * Beyond that the oldest makes room (a name cycling through more quotas rebuilds them: the
 * same strings, only slower).
 */
const policyItems = new Map<string, PolicyItem[]>();
/** Policy names are few (they are written in code); past this, items are made afresh. */
const MAX_POLICY_NAMES = 1024;
const ITEMS_PER_NAME = 32;

/** One policy's `RateLimit-Policy` item: the same string for every request of a route. */
function policyItem(p: HeaderPolicy): string {
  const known = policyItems.get(p.name);
  if (known !== undefined) {
    for (const k of known) {
      if (k.limit === p.limit && k.periodMs === p.periodMs && k.unit === p.quotaUnit) return k.item;
    }
  }
  // `w` is whole seconds: a period that is not (`10/500ms`) goes without it rather than misstate it.
  const window =
    p.quotaUnit !== undefined
      ? `;qu="${p.quotaUnit}"`
      : p.periodMs % 1000 === 0
        ? `;w=${p.periodMs / 1000}`
        : '';
  const item = `"${p.name}";q=${p.limit}${window}`;
  const made: PolicyItem = { limit: p.limit, periodMs: p.periodMs, unit: p.quotaUnit, item };
  if (known === undefined) {
    if (policyItems.size < MAX_POLICY_NAMES) policyItems.set(p.name, [made]);
  } else {
    // The oldest goes first: an identity's override must not push a route's quota out for good.
    if (known.length >= ITEMS_PER_NAME) known.shift();
    known.push(made);
  }
  return item;
}

/** `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-10), added to `out`. */
export function draft10Headers(
  policies: readonly HeaderPolicy[],
  out: Record<string, string> = {},
): Record<string, string> {
  let policy = '';
  let limit = '';
  for (const p of policies) {
    const sep = policy === '' ? '' : ', ';
    policy += sep + policyItem(p);
    limit += `${sep}"${p.name}";r=${shownRemaining(p)};t=${shownResetS(p)}`;
  }
  if (policy === '') return out;
  out['RateLimit-Policy'] = policy;
  out.RateLimit = limit;
  return out;
}

/**
 * Every header for these policies, per `options`: legacy `X-RateLimit-*` and the draft-10
 * pair. Values in seconds, rounded up.
 */
export function rateLimitHeaders(
  policies: readonly HeaderPolicy[],
  options: HeaderOptions = {},
): Record<string, string> {
  const out: Record<string, string> = {};
  if (options.legacy !== false) legacyHeaders(policies, out);
  if (options.standard !== false) draft10Headers(policies, out);
  return out;
}

/** How many `RateLimit-Policy` items are cached for policy `name` (for tests). */
export function cachedPolicyItems(name: string): number {
  return policyItems.get(name)?.length ?? 0;
}
