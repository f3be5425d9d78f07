import { parseRateLimitFields, type RateLimitFields } from './fields.js';
import { Pacer, sleep, type PacingOptions } from './pacer.js';
import {
  mayRetry,
  RateLimitedError,
  resolveRetry,
  retryDelayMs,
  type ResolvedRetry,
  type RetryOptions,
} from './retry.js';

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

export interface RateLimitedFetchOptions extends RetryOptions {
  /**
   * Pacing before the wall (see {@link PacingOptions}), shared by every request of this
   * client, per origin. `false` turns it off. Default on.
   */
  pacing?: PacingOptions | false;
  /** The `fetch` to wrap. Default `globalThis.fetch`. */
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
 * pacing state is shared by its requests):
 * - on a status in `statuses` (429, 503) it waits `Retry-After` (delay-seconds or HTTP-date,
 *   RFC 9110 §10.2.3; it takes precedence) plus jitter, else an exponential backoff with full
 *   jitter, up to `maxAttempts` in all and `maxWaitMs` of waiting in all;
 * - it sends a non-idempotent request (POST, PATCH) again only when it carries the
 *   idempotency key header;
 * - it reads the rate-limit fields of every response (see {@link parseRateLimitFields}) and,
 *   when the quota left is low, spaces the next requests so they do not meet a 429.
 *
 * Responses with other statuses, network errors and aborts are returned or thrown as `fetch`
 * does. A wait ends at once when the request's `signal` aborts (rejecting with its reason).
 * @throws {RangeError} at creation, for an invalid option
 * @throws {RateLimitedError} (the promise rejects) when it gives up on a refused request; the
 *   last response is on the error, its body unread
 */
export function createRateLimitedFetch(options: RateLimitedFetchOptions = {}): RateLimitedFetch {
  const retry = resolveRetry(options);
  const pacer = options.pacing === false ? undefined : new Pacer(options.pacing);
  const send = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  return (input, init) => run(send, retry, pacer, options.onRetry, new Request(input, init));
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

async function run(
  send: typeof fetch,
  retry: ResolvedRetry,
  pacer: Pacer | undefined,
  onRetry: RateLimitedFetchOptions['onRetry'],
  request: Request,
): Promise<Response> {
  const partition = new URL(request.url).origin;
  const retriable = mayRetry(request.method, request.headers.has(retry.idempotencyKeyHeader));
  let waited = 0;
  for (let attempt = 1; ; attempt++) {
    if (pacer) waited += await pacer.reserve(partition, retry.maxWaitMs - waited, request.signal);
    let response: Response;
    let fields: RateLimitFields | undefined;
    try {
      // A clone per attempt: a body is read once.
      response = await send(attempt < retry.maxAttempts && retriable ? request.clone() : request);
      fields = parseRateLimitFields(response.headers);
    } finally {
      pacer?.observe(partition, fields);
    }
    if (!retry.statuses.includes(response.status)) return response;
    if (!retriable)
      throw new RateLimitedError(response, response.status, attempt, 'not-idempotent');
    if (attempt >= retry.maxAttempts) {
      throw new RateLimitedError(response, response.status, attempt, 'attempts');
    }
    const delayMs = retryDelayMs(attempt, fields, retry);
    if (waited + delayMs > retry.maxWaitMs) {
      throw new RateLimitedError(response, response.status, attempt, 'wait-too-long', delayMs);
    }
    onRetry?.({ attempt, status: response.status, delayMs, url: request.url, fields });
    // The refused response's body is not wanted: free its connection.
    await response.body?.cancel().catch(() => undefined);
    await sleep(delayMs, request.signal);
    waited += delayMs;
  }
}
