import { headerValue, parseRateLimitFields, type HeadersLike } from './fields.js';
import { byOriginAndPath, type PartitionOf, type RetryEvent } from './fetch.js';
import { Pacer, sleep, type PacingOptions, type Ticket } from './pacer.js';
import {
  mayRetry,
  RateLimitedError,
  resolveRetry,
  retryDelayMs,
  type RetryOptions,
} from './retry.js';

/**
 * Axios's own types for what passes through an adapter, left open so that every Axios 1.x
 * instance fits without importing Axios's types.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Open = any;

/** The parts of an Axios instance this uses: `axios`, `axios.create()`, `HttpService.axiosRef`. */
export interface AxiosLikeInstance {
  defaults: { adapter?: Open };
}

/** The parts of an Axios request config this reads (Axios 1.x). */
interface AxiosLikeConfig {
  url?: string;
  baseURL?: string;
  method?: string;
  headers?: Open;
  data?: Open;
  signal?: Open;
  adapter?: Open;
}

interface AxiosLikeResponse {
  status: number;
  headers: HeadersLike;
}

type Adapter = (config: AxiosLikeConfig) => Promise<AxiosLikeResponse>;

export interface RateLimitInterceptorOptions extends RetryOptions {
  /** As for {@link createRateLimitedFetch}: per partition, shared by the instance. `false`: off. */
  pacing?: PacingOptions | false;
  /** Which requests share pacing. Default: the same origin and path. */
  partition?: PartitionOf;
  onRetry?: (event: RetryEvent) => void;
}

/** The adapter an Axios config names (a function, or names such as `['xhr', 'http', 'fetch']`). */
async function resolveAdapter(named: Open): Promise<Adapter> {
  if (typeof named === 'function') return named as Adapter;
  // Names are resolved by Axios itself: the application has it, since it hands us an instance.
  const axios = (await import('axios')).default as { getAdapter(named: Open): Adapter };
  return axios.getAdapter(named);
}

/** The URL Axios will call: `url` on `baseURL` unless absolute (as Axios's buildFullPath). */
function urlOf(config: AxiosLikeConfig): URL {
  const url = config.url ?? '';
  const base = (globalThis as { location?: { href?: string } }).location?.href;
  if (/^[a-z][a-z\d+\-.]*:\/\//i.test(url) || !config.baseURL) return new URL(url, base);
  return new URL(`${config.baseURL.replace(/\/+$/, '')}/${url.replace(/^\/+/, '')}`, base);
}

function signalOf(config: AxiosLikeConfig): AbortSignal | undefined {
  const s = config.signal as AbortSignal | undefined;
  return s && typeof s.addEventListener === 'function' ? s : undefined;
}

/** A body read once (a Node stream, a web stream): such a request is sent once. */
function isStream(data: unknown): boolean {
  if (typeof data !== 'object' || data === null) return false;
  const d = data as { pipe?: unknown; getReader?: unknown };
  return typeof d.pipe === 'function' || typeof d.getReader === 'function';
}

/**
 * Adds the cooperative client's rules to an Axios instance (`HttpService.axiosRef` of
 * `@nestjs/axios`, `axios`, or `axios.create()`): pacing before the wall, and on 429/503 a
 * retry after `Retry-After` (or a jittered backoff), with the same options and bounds as
 * {@link createRateLimitedFetch}. A non-idempotent request is sent again only with the
 * idempotency key header.
 *
 * It wraps the instance's adapter, below Axios's interceptors: they see each request once,
 * however many attempts it took. A request that sets an adapter of its own bypasses it.
 * When it gives up, the request rejects with a {@link RateLimitedError} whose `response` is the
 * last Axios response. Other errors pass through unchanged; an abort during a wait rejects with
 * Axios's own `CanceledError`.
 * @returns a function that puts the instance's adapter back
 * @throws {RangeError} for an invalid option
 */
export function rateLimitInterceptor(
  axios: AxiosLikeInstance,
  options: RateLimitInterceptorOptions = {},
): () => void {
  const retry = resolveRetry(options);
  const pacer = options.pacing === false ? undefined : new Pacer(options.pacing);
  const partitionOf = options.partition ?? byOriginAndPath;
  const original: Open = axios.defaults.adapter;

  const limited: Adapter = async (config) => {
    const adapter = await resolveAdapter(
      config.adapter === limited || config.adapter === undefined ? original : config.adapter,
    );
    const signal = signalOf(config);
    const url = urlOf(config);
    const method = (config.method ?? 'get').toUpperCase();
    const headers = (config.headers ?? {}) as HeadersLike;
    const partition = pacer ? partitionOf({ url, method, headers }) : '';
    const keyed = headerValue(headers, retry.idempotencyKeyHeader) !== undefined;
    const retriable = !isStream(config.data) && mayRetry(method, keyed);
    // An abort while we wait: Axios's adapter rejects with its own CanceledError at once.
    const cancelled = () => adapter(config);
    let waited = 0;
    for (let attempt = 1; ; attempt++) {
      let ticket: Ticket | undefined;
      try {
        ticket = pacer && (await pacer.reserve(partition, retry.maxWaitMs - waited, signal));
      } catch (error) {
        if (signal?.aborted) return cancelled();
        throw error;
      }
      if (ticket) waited += ticket.waitedMs;
      let response: AxiosLikeResponse | undefined;
      try {
        response = await adapter(config);
        if (ticket) pacer!.observe(ticket, parseRateLimitFields(response.headers));
        return response;
      } catch (error) {
        response = (error as { response?: AxiosLikeResponse } | null)?.response;
        const refused = response !== undefined && retry.statuses.includes(response.status);
        if (ticket) {
          pacer!.observe(ticket, response && parseRateLimitFields(response.headers), refused);
        }
        if (!refused) throw error;
      }
      const fields = parseRateLimitFields(response!.headers);
      const status = response!.status;
      if (!retriable) throw new RateLimitedError(response, status, attempt, 'not-idempotent');
      if (attempt >= retry.maxAttempts) {
        throw new RateLimitedError(response, status, attempt, 'attempts');
      }
      const delayMs = retryDelayMs(attempt, fields, retry);
      if (waited + delayMs > retry.maxWaitMs) {
        throw new RateLimitedError(response, status, attempt, 'wait-too-long', delayMs);
      }
      options.onRetry?.({ attempt, status, delayMs, url: url.href, fields });
      try {
        await sleep(delayMs, signal);
      } catch (error) {
        if (signal?.aborted) return cancelled();
        throw error;
      }
      waited += delayMs;
    }
  };

  axios.defaults.adapter = limited;
  return () => {
    if (axios.defaults.adapter === limited) axios.defaults.adapter = original;
  };
}
