/**
 * `nest-rate-limit/client`: the cooperative client (see docs/guides/client.md). No Nest, Redis
 * or Node-only import: it runs on Node's `fetch` and in browsers. The Axios interceptor is
 * `nest-rate-limit/client/axios` (it imports Axios).
 */
export {
  headerValue,
  parseRateLimitFields,
  parseRetryAfter,
  type HeadersLike,
  type RateLimitFieldForm,
  type RateLimitFields,
  type RateLimitQuota,
} from './fields.js';
export {
  byOriginAndPath,
  createRateLimitedFetch,
  rateLimitedFetch,
  type PartitionOf,
  type PartitionTarget,
  type FetchInput,
  type RateLimitedFetch,
  type RateLimitedFetchOptions,
  type RetryEvent,
} from './fetch.js';
export type { PacingOptions } from './pacer.js';
export { RateLimitedError, type GiveUpReason, type RetryOptions } from './retry.js';
