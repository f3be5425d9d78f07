import type { PolicyDecision } from '../core/policy.js';

/** A policy's verdict with its window, as the headers need it. Durations in ms. */
export interface HeaderPolicy extends PolicyDecision {
  /** The policy's period in **ms**; sent as `w` in whole seconds. */
  readonly periodMs: number;
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
function shown(p: HeaderPolicy): { remaining: number; resetS: number } {
  if (p.allowed || p.retryAfterMs === Infinity)
    return { remaining: p.remaining, resetS: toSeconds(p.resetMs) };
  return { remaining: 0, resetS: Math.max(1, toSeconds(p.retryAfterMs)) };
}

/**
 * The legacy `X-RateLimit-*` headers, of the most restrictive policy: the lowest
 * remaining, ties going to the longest reset. `X-RateLimit-Reset` is in delta seconds.
 */
export function legacyHeaders(policies: readonly HeaderPolicy[]): Record<string, string> {
  let best: { p: HeaderPolicy; remaining: number; resetS: number } | undefined;
  for (const p of policies) {
    const s = shown(p);
    if (
      !best ||
      s.remaining < best.remaining ||
      (s.remaining === best.remaining && s.resetS > best.resetS)
    ) {
      best = { p, ...s };
    }
  }
  if (!best) return {};
  return {
    'X-RateLimit-Limit': String(best.p.limit),
    'X-RateLimit-Remaining': String(best.remaining),
    'X-RateLimit-Reset': String(best.resetS),
  };
}

/**
 * `RateLimit-Policy` and `RateLimit` as in draft-ietf-httpapi-ratelimit-headers-10
 * (the same wire format as -08 and -09): one list member per policy,
 * `"name";q=<quota>;w=<window s>` and `"name";r=<remaining>;t=<reset s>`.
 */
export function draft10Headers(policies: readonly HeaderPolicy[]): Record<string, string> {
  if (policies.length === 0) return {};
  return {
    // `w` is whole seconds: a period that is not (`10/500ms`) goes without it rather than misstate it.
    'RateLimit-Policy': policies
      .map(
        (p) =>
          `"${p.name}";q=${p.limit}${p.periodMs % 1000 === 0 ? `;w=${p.periodMs / 1000}` : ''}`,
      )
      .join(', '),
    RateLimit: policies
      .map((p) => {
        const s = shown(p);
        return `"${p.name}";r=${s.remaining};t=${s.resetS}`;
      })
      .join(', '),
  };
}

/** Every informational header for these policies, per the options. */
export function rateLimitHeaders(
  policies: readonly HeaderPolicy[],
  options: HeaderOptions = {},
): Record<string, string> {
  return {
    ...(options.legacy !== false && legacyHeaders(policies)),
    ...(options.standard !== false && draft10Headers(policies)),
  };
}
