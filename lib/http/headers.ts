import type { PolicyDecision } from '../core/model/decision.js';
import { STANDARD_HEADERS, type StandardDraft } from './header-drafts.js';
import {
  expiringPolicy,
  toSeconds,
  writeQuotaFields,
  type HeaderPolicy,
  type QuotaFieldNames,
} from './header-values.js';

const LEGACY_FIELDS: QuotaFieldNames = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
];

export { cachedPolicyItems, draft10Headers, type StandardDraft } from './header-drafts.js';
export type { HeaderPolicy } from './header-values.js';

/** Which headers to send (see docs/reference/http-contract.md). */
export interface HeaderOptions {
  /** `X-RateLimit-Limit`, `-Remaining`, `-Reset`. Default true. */
  legacy?: boolean;
  /**
   * The fields of draft-ietf-httpapi-ratelimit-headers to send, by draft: `'draft-6'`
   * (`RateLimit-Limit`, `-Remaining`, `-Reset`, `RateLimit-Policy`), `'draft-7'`
   * (`RateLimit: limit=, remaining=, reset=`), `'draft-8'` and `'draft-10'` (structured
   * `RateLimit` / `RateLimit-Policy` per policy, `t` the reset), `'draft-11'` (the same, `t`
   * the effective window), or `false` for none. Default `'draft-10'`.
   */
  standard?: StandardDraft | false;
}

/** The values `headers.standard` takes. */
export const STANDARD_DRAFTS = Object.keys(STANDARD_HEADERS) as StandardDraft[];

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

/**
 * Legacy headers of the most restrictive policy (lowest remaining; ties: longest reset),
 * added to `out`. An admitting concurrency limit is left out beside rates.
 */
function legacyHeaders(
  policies: readonly HeaderPolicy[],
  out: Record<string, string> = {},
): Record<string, string> {
  const best = expiringPolicy(policies);
  if (best) writeQuotaFields(out, LEGACY_FIELDS, best);
  return out;
}

/**
 * Every header for these policies, per `options`: legacy `X-RateLimit-*` and the fields of
 * the chosen draft (`'draft-10'` by default). Values in seconds, rounded up.
 */
export function rateLimitHeaders(
  policies: readonly HeaderPolicy[],
  options: HeaderOptions = {},
): Record<string, string> {
  const out: Record<string, string> = {};
  if (options.legacy !== false) legacyHeaders(policies, out);
  const standard = options.standard ?? 'draft-10';
  if (standard !== false) STANDARD_HEADERS[standard](policies, out);
  return out;
}
