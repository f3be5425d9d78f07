import { parseRateLimitFields, type HeadersLike, type RateLimitFields } from './fields.js';
import { Pacer, type PacingOptions } from './pacer.js';
import {
  mayRetry,
  resolveRetry,
  waitOrGiveUp,
  type ResolvedRetry,
  type RetryOptions,
} from './retry.js';
import { sleep } from './timers.js';

/** What a retry is about to do; for logs and metrics. */
export interface RetryEvent {
  /** The attempt that was refused, from 1. */
  readonly attempt: number;
  readonly status: number;
  /** The wait before the next attempt, **ms**. */
  readonly delayMs: number;
  readonly url: string;
  readonly fields: RateLimitFields;
}

/** What a partition is chosen from: the request's URL, method and headers. */
export interface PartitionTarget {
  readonly url: URL;
  /** Upper case. */
  readonly method: string;
  readonly headers: HeadersLike;
}

/**
 * Requests of one partition share what the server said of their quota. The default, the
 * origin and path, matches a server that budgets per route (as this module does by default);
 * a server with one budget for its whole API is better paced by origin (`(t) => t.url.origin`),
 * and calls made on behalf of several users by user (their credentials' header).
 */
export type PartitionOf = (target: PartitionTarget) => string;

/** The default {@link PartitionOf}: origin and path, no query. */
export const byOriginAndPath: PartitionOf = (t) => t.url.origin + t.url.pathname;

export interface RateLimitedFetchOptions extends RetryOptions {
  /**
   * Pacing before the wall (see {@link PacingOptions}), shared by every request of this
   * client, per partition. `false` turns it off. Default on.
   */
  pacing?: PacingOptions | false;
  /** Which requests share pacing. Default: the same origin and path ({@link byOriginAndPath}). */
  partition?: PartitionOf;
  /** The `fetch` to wrap, called with the arguments given. Default `globalThis.fetch`. */
  fetch?: typeof fetch;
  /** Called before each wait for a retry. */
  onRetry?: (event: RetryEvent) => void;
}

/** What `fetch` takes as its first argument: a URL string, a `URL` or a `Request`. */
export type FetchInput = Parameters<typeof fetch>[0];

/** A `fetch` with the same signature that paces itself and retries refusals. */
export type RateLimitedFetch = (input: FetchInput, init?: RequestInit) => Promise<Response>;

/**
 * Makes a `fetch` that cooperates with rate-limited servers (one per service you call; its
 * pacing state is shared by its requests, per partition):
 * - on a status in `statuses` (429, 503) it waits `Retry-After` (delay-seconds or HTTP-date,
 *   RFC 9110 §10.2.3; it takes precedence) plus jitter, else an exponential backoff with full
 *   jitter, up to `maxAttempts` in all and `maxWaitMs` of waiting in all;
 * - it sends a non-idempotent request (POST, PATCH) again only when it carries the
 *   idempotency key header, and a request whose body is a stream never (it cannot be re-read);
 * - it reads the rate-limit fields of every response (see {@link parseRateLimitFields}) and,
 *   when the quota left is low, spaces the next requests so they do not meet a 429.
 *
 * The wrapped `fetch` gets the arguments as given (a `Request` input is cloned for each
 * attempt but the last). Responses with other statuses, network errors and aborts are
 * returned or thrown as `fetch` does. A wait ends at once when the request's `signal` aborts
 * (rejecting with its reason).
 * @throws {RangeError} `ERR_RATE_LIMIT_CLIENT_OPTION` at creation, for an invalid option
 * @throws {RateLimitedError} (the promise rejects) when it gives up on a refused request; the
 *   last response is on the error, its body unread
 */
export function createRateLimitedFetch(options: RateLimitedFetchOptions = {}): RateLimitedFetch {
  const retry = resolveRetry(options);
  const pacer = options.pacing === false ? undefined : new Pacer(options.pacing);
  const partitionOf = options.partition ?? byOriginAndPath;
  const send = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  return (input, init) => run(send, retry, pacer, partitionOf, options.onRetry, input, init);
}

/**
 * One request through a fresh {@link createRateLimitedFetch} client: retries as it does,
 * but paces nothing (no earlier response to pace by). Prefer a client per service.
 */
export function rateLimitedFetch(
  input: FetchInput,
  init?: RequestInit,
  options: RateLimitedFetchOptions = {},
): Promise<Response> {
  return createRateLimitedFetch({ ...options, pacing: false })(input, init);
}

/**
 * A URL for choosing a partition: absolute, or relative to the page in a browser; anything
 * else (a relative URL a custom `fetch` resolves itself) stands for itself under `http://local`.
 */
export function partitionUrl(url: string): URL {
  const base = (globalThis as { location?: { href?: string } }).location?.href;
  try {
    return new URL(url, base);
  } catch {
    return new URL(`http://local/${encodeURIComponent(url)}`);
  }
}

/**
 * A body read once: a web stream, a Node stream or another async iterable. Strings, buffers,
 * Blobs, FormData and URLSearchParams can be sent again.
 */
export function isStream(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  const b = body as { getReader?: unknown; pipe?: unknown; [Symbol.asyncIterator]?: unknown };
  return (
    typeof b.getReader === 'function' ||
    typeof b.pipe === 'function' ||
    typeof b[Symbol.asyncIterator] === 'function'
  );
}

interface RequestLike {
  readonly url: string;
  readonly method: string;
  readonly headers: Headers;
  readonly signal?: AbortSignal | null;
  clone(): RequestLike;
}

/** A `Request`, also one of another fetch implementation or realm. */
function requestOf(input: FetchInput): RequestLike | undefined {
  const r = input as unknown as Partial<RequestLike>;
  return typeof input === 'object' &&
    input !== null &&
    !(input instanceof URL) &&
    typeof r.url === 'string' &&
    typeof r.clone === 'function'
    ? (r as RequestLike)
    : undefined;
}

/** The request's URL, method, headers and signal, read without consuming its body. */
function describe(input: FetchInput, init: RequestInit | undefined) {
  const request = requestOf(input);
  const url = request ? request.url : String(input);
  const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
  const headers = new Headers(init?.headers ?? request?.headers);
  const signal = init?.signal ?? request?.signal ?? undefined;
  // A stream in `init` is read once: such a request is sent once. (A Request input is cloned.)
  return { request, url, method, headers, signal, stream: isStream(init?.body) };
}

async function run(
  send: typeof fetch,
  retry: ResolvedRetry,
  pacer: Pacer | undefined,
  partitionOf: PartitionOf,
  onRetry: RateLimitedFetchOptions['onRetry'],
  input: FetchInput,
  init: RequestInit | undefined,
): Promise<Response> {
  const { request, url, method, headers, signal, stream } = describe(input, init);
  const partition = pacer ? partitionOf({ url: partitionUrl(url), method, headers }) : '';
  const retriable = !stream && mayRetry(method, headers.has(retry.idempotencyKeyHeader));
  let waited = 0;
  for (let attempt = 1; ; attempt++) {
    const ticket = pacer && (await pacer.reserve(partition, retry.maxWaitMs - waited, signal));
    if (ticket) waited += ticket.waitedMs;
    let response: Response | undefined;
    let fields: RateLimitFields | undefined;
    try {
      // A Request's body is read once: a clone per attempt but the last.
      const again = attempt < retry.maxAttempts && retriable && request !== undefined;
      response = await send(again ? (request!.clone() as unknown as Request) : input, init);
      fields = parseRateLimitFields(response.headers);
    } finally {
      if (ticket) pacer!.observe(ticket, fields, retry.statuses.includes(response?.status ?? 0));
    }
    if (!retry.statuses.includes(response.status)) return response;
    const delayMs = waitOrGiveUp(
      response,
      response.status,
      fields,
      attempt,
      waited,
      retriable,
      retry,
    );
    onRetry?.({ attempt, status: response.status, delayMs, url, fields });
    // The refused response's body is not wanted: free its connection.
    await response.body?.cancel().catch(() => undefined);
    await sleep(delayMs, signal);
    waited += delayMs;
  }
}
