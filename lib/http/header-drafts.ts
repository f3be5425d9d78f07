import {
  expiringPolicy,
  shownRemaining,
  shownResetS,
  toSeconds,
  writeQuotaFields,
  type HeaderPolicy,
  type QuotaFieldNames,
} from './header-values.js';

/**
 * The drafts of draft-ietf-httpapi-ratelimit-headers whose fields the server can send
 * (`headers.standard`): one function each, adding that draft's fields to `out`.
 */
export type StandardDraft = 'draft-6' | 'draft-7' | 'draft-8' | 'draft-10' | 'draft-11';

type DraftHeaders = (policies: readonly HeaderPolicy[], out: Record<string, string>) => void;

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

/** One policy's structured `RateLimit-Policy` item: the same string for every request of a route. */
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

/** How many `RateLimit-Policy` items are cached for policy `name` (for tests). */
export function cachedPolicyItems(name: string): number {
  return policyItems.get(name)?.length ?? 0;
}

/**
 * The structured pair of drafts 8 to 10: `RateLimit-Policy: "name";q=;w=` and
 * `RateLimit: "name";r=;t=`, one item per policy, `t` the seconds until the quota resets
 * (on a refusal, the wait: "the same point in time as the Retry-After field value").
 * `t` is given by `reset(p)`.
 */
function structured(
  policies: readonly HeaderPolicy[],
  out: Record<string, string>,
  reset: (p: HeaderPolicy) => number,
): void {
  let policy = '';
  let limit = '';
  for (const p of policies) {
    const sep = policy === '' ? '' : ', ';
    policy += sep + policyItem(p);
    limit += `${sep}"${p.name}";r=${shownRemaining(p)};t=${reset(p)}`;
  }
  if (policy === '') return;
  out['RateLimit-Policy'] = policy;
  out.RateLimit = limit;
}

/** `RateLimit-Policy` and `RateLimit` of draft-ietf-httpapi-ratelimit-headers-10 (and 8, 9). */
export function draft10Headers(
  policies: readonly HeaderPolicy[],
  out: Record<string, string> = {},
): Record<string, string> {
  structured(policies, out, shownResetS);
  return out;
}

/**
 * The effective window of draft 11 (§4.1.2), whole seconds rounded up: the time within which
 * the client can use no more than `r`. A window's quota comes back when it resets (as in
 * draft 10); a token bucket or GCRA gives one unit back per emission interval, so its window
 * is the time until the next unit: the reset less the units still missing after that one.
 * On a refusal it is the wait, so that `Retry-After` is not earlier than its end.
 */
function effectiveWindowS(p: HeaderPolicy): number {
  const capacity = p.capacity;
  if (capacity === undefined || !p.allowed || p.quotaUnit !== undefined) return shownResetS(p);
  const emissionMs = p.periodMs / p.limit;
  const missing = capacity - p.remaining - 1;
  return Math.max(1, toSeconds(missing < 0 ? emissionMs : p.resetMs - missing * emissionMs));
}

/**
 * `RateLimit-Policy` and `RateLimit` of draft-ietf-httpapi-ratelimit-headers-11: the syntax of
 * draft 10, with `r` the available quota and `t` the effective window.
 */
export function draft11Headers(
  policies: readonly HeaderPolicy[],
  out: Record<string, string> = {},
): Record<string, string> {
  structured(policies, out, effectiveWindowS);
  return out;
}

/** Whether a policy can be an item of drafts 6 and 7's `RateLimit-Policy`: `w` is required. */
const listable = (p: HeaderPolicy) => p.quotaUnit === undefined && p.periodMs % 1000 === 0;

/**
 * `RateLimit-Policy` of drafts 6 and 7: `q;w=` per policy, without names, the expiring one
 * first (clients read the first item as the window of the one quota sent). `w` is required
 * there (draft 7 §2.1), so a concurrency limit or a period of a fraction of a second is left
 * out; and two items may not have the same quota (§3.5): the first of each is kept. Undefined
 * when the expiring policy cannot be listed: a list without it would pair its quota with
 * another policy's window.
 */
function plainPolicies(policies: readonly HeaderPolicy[], first: HeaderPolicy): string | undefined {
  if (!listable(first)) return undefined;
  const seen = new Set<number>();
  let out = '';
  for (const p of [first, ...policies]) {
    if (!listable(p) || seen.has(p.limit)) continue;
    seen.add(p.limit);
    out += `${out === '' ? '' : ', '}${p.limit};w=${p.periodMs / 1000}`;
  }
  return out;
}

/** Drafts 6 and 7: one quota, the expiring policy's, written by `write`, and the policy list. */
function singleQuota(
  policies: readonly HeaderPolicy[],
  out: Record<string, string>,
  write: (p: HeaderPolicy) => void,
): Record<string, string> {
  const p = expiringPolicy(policies);
  if (!p) return out;
  const items = plainPolicies(policies, p);
  if (items !== undefined) out['RateLimit-Policy'] = items;
  write(p);
  return out;
}

const DRAFT6_FIELDS: QuotaFieldNames = [
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
];

/**
 * Draft 6: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds) of the
 * expiring policy, and `RateLimit-Policy` listing the quotas.
 */
export function draft6Headers(
  policies: readonly HeaderPolicy[],
  out: Record<string, string> = {},
): Record<string, string> {
  return singleQuota(policies, out, (p) => writeQuotaFields(out, DRAFT6_FIELDS, p));
}

/**
 * Draft 7: `RateLimit: limit=, remaining=, reset=` (a Dictionary, seconds) of the expiring
 * policy, and `RateLimit-Policy` listing the quotas.
 */
export function draft7Headers(
  policies: readonly HeaderPolicy[],
  out: Record<string, string> = {},
): Record<string, string> {
  return singleQuota(policies, out, (p) => {
    out.RateLimit = `limit=${p.limit}, remaining=${shownRemaining(p)}, reset=${shownResetS(p)}`;
  });
}

/**
 * Each draft's fields. Drafts 8 to 10 have the same syntax; draft 8's `t` is the time until the
 * quota resets, draft 10's "until additional quota is made available". Both are sent as the
 * time until the state is full again (as this module always has): draft 10's exact value for a
 * window, and never shorter than it for a token bucket or GCRA, so a client waiting `t` is not
 * refused for waiting too little. `'draft-11'` gives the next unit's time.
 */
export const STANDARD_HEADERS: Readonly<Record<StandardDraft, DraftHeaders>> = {
  'draft-6': draft6Headers,
  'draft-7': draft7Headers,
  'draft-8': draft10Headers,
  'draft-10': draft10Headers,
  'draft-11': draft11Headers,
};
