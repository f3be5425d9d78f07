import { parseDictionary, parseList, type BareItem, type SfItem } from './structured-fields.js';

/**
 * Response headers as the common clients hold them: a fetch `Headers`, or a plain object
 * (Axios, Node's `IncomingMessage.headers`) with any case of names.
 */
export type HeadersLike =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | number | undefined | null>>;

/** One quota a response reported. */
export interface RateLimitQuota {
  /** The policy's name (`"name"` in the structured drafts); undefined in the older forms. */
  readonly name?: string;
  /** Quota units left (`r`, `remaining`, `*-Remaining`). */
  readonly remaining: number;
  /**
   * **Seconds** until the quota is restored (`t`, `reset`, `*-Reset`; an `X-RateLimit-Reset`
   * that is an epoch time in seconds, as GitHub sends it, is turned into seconds from now, to
   * the ms).
   */
  readonly resetSeconds: number;
  /** The quota of the policy (`q`, `RateLimit-Limit`, `X-RateLimit-Limit`), when sent. */
  readonly limit?: number;
  /** The policy's window in **seconds** (`w`), when sent. */
  readonly windowSeconds?: number;
  /** The partition key (`pk`, base64 of its bytes), when sent: quotas of other partitions are not yours. */
  readonly partitionKey?: string;
}

/** Which form the quotas were read from, most recent first. */
export type RateLimitFieldForm =
  | 'structured' // draft-ietf-httpapi-ratelimit-headers-08 and later (10, 11): `"name";r=;t=`
  | 'draft-7' // `RateLimit: limit=, remaining=, reset=`
  | 'draft-6' // `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`
  | 'x-ratelimit'; // `X-RateLimit-Limit`, `-Remaining`, `-Reset`

/** What a response says of its rate limits. */
export interface RateLimitFields {
  /** Every quota reported, in the order sent; empty when none could be read. */
  readonly quotas: readonly RateLimitQuota[];
  /** The quota with the least left (ties: the longest reset): the one to pace by. */
  readonly tightest?: RateLimitQuota;
  /**
   * `Retry-After` in **ms** (RFC 9110 §10.2.3: delay-seconds or an HTTP-date), when present and
   * valid. The draft says a client gives it precedence over the quota fields.
   */
  readonly retryAfterMs?: number;
  readonly form?: RateLimitFieldForm;
}

/** One field of `headers`, repeated ones joined with `, ` (RFC 9110 §5.3); any case of name. */
export function headerValue(headers: HeadersLike, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    const value = (headers as { get(name: string): unknown }).get(name);
    return value === undefined || value === null ? undefined : String(value);
  }
  const record = headers as Record<string, unknown>;
  let value = record[name] ?? record[name.toLowerCase()];
  if (value === undefined) {
    const lower = name.toLowerCase();
    for (const key of Object.keys(record)) if (key.toLowerCase() === lower) value = record[key];
  }
  if (value === undefined || value === null) return undefined;
  // Repeated fields combine into one list, as RFC 9110 §5.3 says.
  return Array.isArray(value) ? value.join(', ') : String(value);
}

const DELAY_SECONDS = /^\s*(\d+)\s*$/;
const HTTP_DATE = [
  /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/, // IMF-fixdate
  /^[A-Z][a-z]+day, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/, // rfc850-date
  /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/, // asctime-date
];

/**
 * `Retry-After` (RFC 9110 §10.2.3) in **ms** from `nowMs`: delay-seconds, or an HTTP-date
 * (0 when it has passed). `undefined` when absent or neither form.
 */
export function parseRetryAfter(
  value: string | undefined | null,
  nowMs = Date.now(),
): number | undefined {
  if (value === undefined || value === null) return undefined;
  const seconds = DELAY_SECONDS.exec(value);
  if (seconds) return Number(seconds[1]) * 1000;
  // The three HTTP-date forms (RFC 9110 §5.6.7); Date.parse alone takes nearly anything.
  if (!HTTP_DATE.some((form) => form.test(value.trim()))) return undefined;
  // asctime-date has no zone: it is GMT, never the local time Date.parse would take.
  const trimmed = value.trim();
  const at = Date.parse(HTTP_DATE[2]!.test(trimmed) ? `${trimmed} GMT` : trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

const count = (v: SfItem['value'] | undefined): number | undefined =>
  typeof v === 'number' && v >= 0 ? v : undefined;

/** A Byte Sequence's base64 text (a partition key), else undefined. */
const bytesOf = (v: BareItem | undefined): string | undefined =>
  typeof v === 'object' && 'bytes' in v ? v.bytes : undefined;

function nonNegative(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*\d+(\.\d+)?\s*$/.test(value)) return undefined;
  return Number(value);
}

/** `RateLimit-Policy` of drafts 8 and later: per name, its quota, window and partition. */
function structuredPolicies(field: string | undefined): Map<string, Partial<RateLimitQuota>> {
  const out = new Map<string, Partial<RateLimitQuota>>();
  for (const item of (field !== undefined && parseList(field)) || []) {
    if (typeof item.value !== 'string') continue;
    const pk = item.params.get('pk');
    out.set(item.value, {
      limit: count(item.params.get('q')),
      windowSeconds: count(item.params.get('w')),
      partitionKey: bytesOf(pk),
    });
  }
  return out;
}

/** `RateLimit: "name";r=;t=` of drafts 8 and later (10 and 11 keep the syntax). */
function structured(headers: HeadersLike): RateLimitQuota[] | undefined {
  const field = headerValue(headers, 'RateLimit');
  const items = field === undefined ? undefined : parseList(field);
  if (!items || items.length === 0 || items.some((i) => typeof i.value !== 'string')) {
    return undefined;
  }
  const policies = structuredPolicies(headerValue(headers, 'RateLimit-Policy'));
  const out: RateLimitQuota[] = [];
  for (const item of items) {
    const name = item.value as string;
    const remaining = count(item.params.get('r'));
    if (remaining === undefined) continue;
    const policy = policies.get(name) ?? {};
    const pk = item.params.get('pk');
    out.push(
      clean({
        name,
        remaining,
        resetSeconds: count(item.params.get('t')) ?? 0,
        limit: policy.limit,
        windowSeconds: policy.windowSeconds,
        partitionKey: bytesOf(pk) ?? policy.partitionKey,
      }),
    );
  }
  return out;
}

/**
 * `RateLimit-Policy: 100;w=60` of drafts 6 and 7: the window of the item whose quota is the
 * limit sent (the first such); none when no item has that quota, rather than another's.
 */
function plainPolicy(headers: HeadersLike, limit: number | undefined): Partial<RateLimitQuota> {
  const field = headerValue(headers, 'RateLimit-Policy');
  const items = (field !== undefined && parseList(field)) || [];
  const first = items[0];
  if (limit === undefined) {
    return first && typeof first.value === 'number'
      ? { limit: count(first.value), windowSeconds: count(first.params.get('w')) }
      : {};
  }
  const same = items.find((i) => i.value === limit);
  return same ? { limit, windowSeconds: count(same.params.get('w')) } : {};
}

/** `RateLimit: limit=100, remaining=99, reset=60` (draft 7). */
function draft7(headers: HeadersLike): RateLimitQuota[] | undefined {
  const field = headerValue(headers, 'RateLimit');
  const dict = field === undefined ? undefined : parseDictionary(field);
  const remaining = count(dict?.get('remaining')?.value);
  if (!dict || remaining === undefined) return undefined;
  const limit = count(dict.get('limit')?.value);
  const policy = plainPolicy(headers, limit);
  return [
    clean({
      remaining,
      resetSeconds: count(dict.get('reset')?.value) ?? 0,
      limit: limit ?? policy.limit,
      windowSeconds: policy.windowSeconds,
    }),
  ];
}

/** `<prefix>-Limit`, `-Remaining`, `-Reset` (draft 6 with `RateLimit`, or `X-RateLimit`). */
function separate(
  headers: HeadersLike,
  prefix: string,
  nowMs: number,
): RateLimitQuota[] | undefined {
  const remaining = nonNegative(headerValue(headers, `${prefix}-Remaining`));
  if (remaining === undefined) return undefined;
  let reset = nonNegative(headerValue(headers, `${prefix}-Reset`)) ?? 0;
  // Some APIs send the reset as an epoch time in seconds (GitHub); no window is 10 years long.
  // The server rounded it up already: to the ms, not once more to a whole second.
  if (reset > 315_360_000) reset = Math.max(0, Math.round(reset * 1000 - nowMs) / 1000);
  const limit = nonNegative(headerValue(headers, `${prefix}-Limit`));
  const policy = prefix === 'RateLimit' ? plainPolicy(headers, limit) : {};
  return [
    clean({
      remaining: Math.floor(remaining),
      resetSeconds: reset,
      limit: limit ?? policy.limit,
      windowSeconds: policy.windowSeconds,
    }),
  ];
}

function clean(q: { -readonly [K in keyof RateLimitQuota]: RateLimitQuota[K] }): RateLimitQuota {
  for (const key of Object.keys(q) as (keyof RateLimitQuota)[]) {
    if (q[key] === undefined) delete q[key];
  }
  return q;
}

function tightestOf(quotas: readonly RateLimitQuota[]): RateLimitQuota | undefined {
  let best: RateLimitQuota | undefined;
  for (const q of quotas) {
    if (
      !best ||
      q.remaining < best.remaining ||
      (q.remaining === best.remaining && q.resetSeconds > best.resetSeconds)
    ) {
      best = q;
    }
  }
  return best;
}

/**
 * Reads the rate-limit fields of a response, whichever draft of
 * draft-ietf-httpapi-ratelimit-headers the server follows: the structured `RateLimit` /
 * `RateLimit-Policy` of drafts 8 to 11 (with `pk` partitions), draft 7's dictionary, draft 6's
 * separate fields, or `X-RateLimit-*`, in that order of preference (the first form present
 * is read; a malformed field counts as absent). Never throws.
 * @param nowMs the clock for an HTTP-date `Retry-After` or an epoch reset, in ms
 */
export function parseRateLimitFields(
  headers: HeadersLike | null | undefined,
  nowMs = Date.now(),
): RateLimitFields {
  if (headers === null || headers === undefined || typeof headers !== 'object')
    return { quotas: [] };
  const retryAfterMs = parseRetryAfter(headerValue(headers, 'Retry-After'), nowMs);
  const forms: [RateLimitFieldForm, () => RateLimitQuota[] | undefined][] = [
    ['structured', () => structured(headers)],
    ['draft-7', () => draft7(headers)],
    ['draft-6', () => separate(headers, 'RateLimit', nowMs)],
    ['x-ratelimit', () => separate(headers, 'X-RateLimit', nowMs)],
  ];
  for (const [form, read] of forms) {
    const quotas = read();
    if (quotas && quotas.length > 0) {
      const tightest = tightestOf(quotas);
      return retryAfterMs === undefined
        ? { quotas, tightest, form }
        : { quotas, tightest, form, retryAfterMs };
    }
  }
  return retryAfterMs === undefined ? { quotas: [] } : { quotas: [], retryAfterMs };
}
