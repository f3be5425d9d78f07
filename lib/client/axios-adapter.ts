import axiosModule from 'axios';
import {
  headerValue,
  parseRateLimitFields,
  type HeadersLike,
  type RateLimitFields,
} from './fields.js';
import {
  byOriginAndPath,
  isStream,
  partitionUrl,
  type PartitionOf,
  type RetryEvent,
} from './fetch.js';
import { Pacer, type PacingOptions, type Ticket } from './pacer.js';
import { mayRetry, resolveRetry, waitOrGiveUp, type RetryOptions } from './retry.js';
import { sleep } from './timers.js';

/**
 * Axios's own types for what passes through an adapter, left open so that every Axios 1.x
 * instance fits without importing Axios's types.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Open = any;

/**
 * `nest-rate-limit/client/axios`: the cooperative client's rules on an Axios instance. Its own
 * entry, since it imports Axios, which `nest-rate-limit/client` must not need.
 */

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
  /** As for `createRateLimitedFetch`: per partition, shared by the instance. `false`: off. */
  pacing?: PacingOptions | false;
  /** Which requests share pacing. Default: the same origin and path. */
  partition?: PartitionOf;
  onRetry?: (event: RetryEvent) => void;
}

/**
 * What this needs of Axios itself (>= 1.5): resolving a named adapter (`['xhr', 'http',
 * 'fetch']`, the default) to its function, and Axios's own cancellation error.
 */
const axiosApi = axiosModule as unknown as {
  getAdapter(named: Open): Adapter;
  CanceledError: new (message?: string, code?: string, config?: Open) => Error;
};

/** Marks an adapter made here, with the adapter it stands in front of. */
const WRAPPED = Symbol.for('nest-rate-limit.client.axios');
type Wrapper = Adapter & { [WRAPPED]?: Open };

/** The adapter to call: a config's own, unless it is one of ours (then the one below it). */
function adapterBelow(named: Open, below: Open): Adapter {
  const chosen = named === undefined || (named as Wrapper)[WRAPPED] !== undefined ? below : named;
  return typeof chosen === 'function' ? (chosen as Adapter) : axiosApi.getAdapter(chosen);
}

/** The URL Axios will call: `url` on `baseURL` unless absolute (as Axios's buildFullPath). */
function urlOf(config: AxiosLikeConfig): string {
  const url = config.url ?? '';
  if (/^([a-z][a-z\d+\-.]*:)?\/\//i.test(url) || !config.baseURL) return url;
  return `${config.baseURL.replace(/\/+$/, '')}/${url.replace(/^\/+/, '')}`;
}

function signalOf(config: AxiosLikeConfig): AbortSignal | undefined {
  const s = config.signal as AbortSignal | undefined;
  return s && typeof s.addEventListener === 'function' ? s : undefined;
}

/**
 * Adds the cooperative client's rules to an Axios instance (`HttpService.axiosRef` of
 * `@nestjs/axios`, `axios`, or `axios.create()`): pacing before the wall, and on 429/503 a
 * retry after `Retry-After` (or a jittered backoff), with the same options and bounds as
 * `createRateLimitedFetch`. A non-idempotent request is sent again only with the idempotency
 * key header, a request with a stream body never.
 *
 * It wraps the instance's adapter, below Axios's interceptors: they see each request once,
 * however many attempts it took. A request that sets an adapter of its own bypasses it.
 * Installing it again on the same instance (or on one made from it with `create()`) replaces
 * the one before. When it gives up, the request rejects with a `RateLimitedError` whose
 * `response` is the last Axios response. Other errors pass through unchanged; an abort during a
 * wait rejects with Axios's own `CanceledError`, the request not sent again. A status the
 * instance's `validateStatus` accepts is returned (and paced by), not retried.
 * @returns a function that puts the instance's adapter back (when this one is still in place)
 * @throws {RangeError} `ERR_RATE_LIMIT_CLIENT_OPTION` for an invalid option
 */
export function rateLimitInterceptor(
  axios: AxiosLikeInstance,
  options: RateLimitInterceptorOptions = {},
): () => void {
  const retry = resolveRetry(options);
  const pacer = options.pacing === false ? undefined : new Pacer(options.pacing);
  const partitionOf = options.partition ?? byOriginAndPath;
  const current: Open = axios.defaults.adapter;
  // Installed again (or on an instance made from one that has it): this one takes its place.
  const original: Open = (current as Wrapper | undefined)?.[WRAPPED] ?? current;

  const limited: Wrapper = async (config) => {
    const adapter = adapterBelow(config.adapter, original);
    const signal = signalOf(config);
    const url = urlOf(config);
    const method = (config.method ?? 'get').toUpperCase();
    const headers = (config.headers ?? {}) as HeadersLike;
    const partition = pacer ? partitionOf({ url: partitionUrl(url), method, headers }) : '';
    const keyed = headerValue(headers, retry.idempotencyKeyHeader) !== undefined;
    const retriable = !isStream(config.data) && mayRetry(method, keyed);
    // An abort while we wait ends the request as Axios would, without sending it.
    const cancelled = () => new axiosApi.CanceledError(undefined, undefined, config);
    let waited = 0;
    for (let attempt = 1; ; attempt++) {
      let ticket: Ticket | undefined;
      try {
        ticket = pacer && (await pacer.reserve(partition, retry.maxWaitMs - waited, signal));
      } catch (error) {
        throw signal?.aborted ? cancelled() : error;
      }
      if (ticket) waited += ticket.waitedMs;
      let response: AxiosLikeResponse | undefined;
      let fields: RateLimitFields | undefined;
      try {
        response = await adapter(config);
        // A status the app's validateStatus accepts is its to handle: paced by, not retried.
        const refused = retry.statuses.includes(response.status);
        if (ticket) pacer!.observe(ticket, parseRateLimitFields(response.headers), refused);
        return response;
      } catch (error) {
        response = (error as { response?: AxiosLikeResponse } | null)?.response;
        const refused = response !== undefined && retry.statuses.includes(response.status);
        fields = response && parseRateLimitFields(response.headers);
        if (ticket) pacer!.observe(ticket, fields, refused);
        if (!refused) throw error;
      }
      const status = response!.status;
      const delayMs = waitOrGiveUp(response, status, fields!, attempt, waited, retriable, retry);
      options.onRetry?.({ attempt, status, delayMs, url, fields: fields! });
      try {
        await sleep(delayMs, signal);
      } catch (error) {
        throw signal?.aborted ? cancelled() : error;
      }
      waited += delayMs;
    }
  };
  limited[WRAPPED] = original;

  axios.defaults.adapter = limited;
  return () => {
    if (axios.defaults.adapter === limited) axios.defaults.adapter = original;
  };
}
