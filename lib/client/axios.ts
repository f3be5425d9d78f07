import { headerValue, parseRateLimitFields, type HeadersLike } from './fields.js';
import type { RetryEvent } from './fetch.js';
import { Pacer, sleep, type PacingOptions } from './pacer.js';
import {
  mayRetry,
  RateLimitedError,
  resolveRetry,
  retryDelayMs,
  type RetryOptions,
} from './retry.js';

/** The parts of an Axios request config this reads (Axios 1.x). */
export interface AxiosLikeConfig {
  url?: string;
  baseURL?: string;
  method?: string;
  headers?: unknown;
  signal?: unknown;
  [key: string]: unknown;
}

/**
 * Axios's own types for what passes through its interceptors, left open so that every Axios
 * 1.x instance fits without importing Axios.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Open = any;

/** The parts of an Axios instance this uses: `axios`, `axios.create()`, `HttpService.axiosRef`. */
export interface AxiosLikeInstance {
  interceptors: {
    request: {
      use(onFulfilled: (config: Open) => Open, onRejected?: (error: Open) => Open): number;
      eject(id: number): void;
    };
    response: {
      use(onFulfilled: (response: Open) => Open, onRejected?: (error: Open) => Open): number;
      eject(id: number): void;
    };
  };
  request(config: Open): Promise<Open>;
}

interface AxiosLikeResponse {
  status: number;
  headers: HeadersLike;
  config: AxiosLikeConfig;
}

export interface RateLimitInterceptorOptions extends RetryOptions {
  /** As for {@link createRateLimitedFetch}: per origin, shared by the instance. `false`: off. */
  pacing?: PacingOptions | false;
  onRetry?: (event: RetryEvent) => void;
}

/**
 * Where an interceptor keeps a request's attempts on its config (Axios copies it to a retry's
 * config): a key per interceptor, so two on one instance never read each other's.
 */
let interceptors = 0;

interface RequestState {
  attempt: number;
  /** ms waited so far, pacing and retries. */
  waited: number;
  partition?: string;
}

function stateOf(config: AxiosLikeConfig, key: string): RequestState {
  const known = config[key] as RequestState | undefined;
  const state = known ?? { attempt: 1, waited: 0 };
  config[key] = state;
  return state;
}

function originOf(config: AxiosLikeConfig): string {
  try {
    return new URL(config.url ?? '', config.baseURL).origin;
  } catch {
    return config.baseURL ?? '';
  }
}

function signalOf(config: AxiosLikeConfig): AbortSignal | undefined {
  const s = config.signal as AbortSignal | undefined;
  return s && typeof s.addEventListener === 'function' ? s : undefined;
}

/**
 * Adds the cooperative client's rules to an Axios instance (`HttpService.axiosRef` of
 * `@nestjs/axios`, `axios`, or `axios.create()`): pacing before the wall, and on 429/503 a
 * retry after `Retry-After` (or a jittered backoff), with the same options and bounds as
 * {@link createRateLimitedFetch}. A non-idempotent request is sent again only with the
 * idempotency key header.
 *
 * When it gives up, the request rejects with a {@link RateLimitedError} whose `response` is
 * the last Axios response. Other errors pass through unchanged.
 * @returns a function that removes the interceptors again
 * @throws {RangeError} for an invalid option
 */
export function rateLimitInterceptor(
  axios: AxiosLikeInstance,
  options: RateLimitInterceptorOptions = {},
): () => void {
  const retry = resolveRetry(options);
  const pacer = options.pacing === false ? undefined : new Pacer(options.pacing);
  const STATE = `rateLimitClient${++interceptors}`;

  const onRequest = async (config: AxiosLikeConfig): Promise<AxiosLikeConfig> => {
    const state = stateOf(config, STATE);
    if (pacer) {
      const partition = originOf(config);
      state.waited += await pacer.reserve(
        partition,
        retry.maxWaitMs - state.waited,
        signalOf(config),
      );
      state.partition = partition;
    }
    return config;
  };

  const observed = (config: AxiosLikeConfig | undefined, headers: HeadersLike | undefined) => {
    const state = config?.[STATE] as RequestState | undefined;
    if (!pacer || state?.partition === undefined) return;
    pacer.observe(state.partition, headers && parseRateLimitFields(headers));
    state.partition = undefined;
  };

  const onResponse = (response: AxiosLikeResponse): AxiosLikeResponse => {
    observed(response.config, response.headers);
    return response;
  };

  const onError = async (error: { config?: AxiosLikeConfig; response?: AxiosLikeResponse }) => {
    const { config, response } = error ?? {};
    observed(config, response?.headers);
    if (!config || !response || !retry.statuses.includes(response.status)) throw error;
    const state = stateOf(config, STATE);
    const fields = parseRateLimitFields(response.headers);
    const method = config.method ?? 'get';
    const keyed =
      config.headers !== undefined &&
      config.headers !== null &&
      headerValue(config.headers as HeadersLike, retry.idempotencyKeyHeader) !== undefined;
    if (!mayRetry(method, keyed)) {
      throw new RateLimitedError(response, response.status, state.attempt, 'not-idempotent');
    }
    if (state.attempt >= retry.maxAttempts) {
      throw new RateLimitedError(response, response.status, state.attempt, 'attempts');
    }
    const delayMs = retryDelayMs(state.attempt, fields, retry);
    if (state.waited + delayMs > retry.maxWaitMs) {
      throw new RateLimitedError(
        response,
        response.status,
        state.attempt,
        'wait-too-long',
        delayMs,
      );
    }
    const url = `${config.baseURL ?? ''}${config.url ?? ''}`;
    options.onRetry?.({ attempt: state.attempt, status: response.status, delayMs, url, fields });
    await sleep(delayMs, signalOf(config));
    state.waited += delayMs;
    state.attempt++;
    return axios.request(config);
  };

  const requestId = axios.interceptors.request.use(onRequest);
  const responseId = axios.interceptors.response.use(onResponse, onError);
  return () => {
    axios.interceptors.request.eject(requestId);
    axios.interceptors.response.eject(responseId);
  };
}
