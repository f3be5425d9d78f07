import type { ExecutionContext, ModuleMetadata, Type } from '@nestjs/common';
import type { ThrottlerStorage, ThrottlerStorageRecord } from './storage.js';

// The throttler's public types (v6.7), with their units stated: `ttl` and `blockDuration` are
// in **milliseconds**; what the storage reports (`timeToExpire`, `timeToBlockExpire`) is in
// **seconds**, as the headers show it.

/**
 * A request or response as the throttler types them, loosely, so that the code users wrote
 * against it (`req.headers['x-api-key']`, `res.header(...)`) compiles unchanged.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the throttler's public type
export type ThrottlerRecord = Record<string, any>;

/** A value, or a function of the request's context that gives it. */
export type Resolvable<T extends number | string | boolean> =
  T | ((context: ExecutionContext) => T | Promise<T>);

/** The tracker of a request: who is limited (the client's address by default). */
export type ThrottlerGetTrackerFunction = (
  req: ThrottlerRecord,
  context: ExecutionContext,
) => Promise<string> | string;

/** The budget's key from the route, the tracker and the throttler's name. */
export type ThrottlerGenerateKeyFunction = (
  context: ExecutionContext,
  trackerString: string,
  throttlerName: string,
) => string;

/** One named throttler: `limit` requests per `ttl` ms, per route and tracker. */
export interface ThrottlerOptions {
  /** Default `'default'`; other names suffix the headers (`X-RateLimit-Limit-<name>`). */
  name?: string;
  /** Requests admitted per window; `Infinity` (or above 2^50) = no limit. */
  limit: Resolvable<number>;
  /** The window, in **ms** (above 2^40 ms, about 34 years, it counts as 2^40 ms). */
  ttl: Resolvable<number>;
  /**
   * How long, in **ms**, a tracker that went over the limit is refused, counted from that
   * refusal (`Retry-After` shows the block's rest, in seconds); the first request after it
   * opens a fresh window. Default: none (unset or 0): a refused tracker waits for its window
   * to end. (A guard subclass's `handleRequest` receives the `ttl` here when it is unset, as
   * the throttler passes it; our storages still count no block.) Above 2^40 ms (about 34
   * years) it counts as 2^40 ms.
   */
  blockDuration?: Resolvable<number>;
  /** Requests whose `User-Agent` matches one of these are not counted by this throttler. */
  ignoreUserAgents?: RegExp[];
  /** Skips this throttler for a request when it returns true. */
  skipIf?: (context: ExecutionContext) => boolean;
  getTracker?: ThrottlerGetTrackerFunction;
  generateKey?: ThrottlerGenerateKeyFunction;
  /** Whether to write the `X-RateLimit-*` and `Retry-After` headers. Default true. */
  setHeaders?: boolean;
}

/** `ThrottlerModule.forRoot`'s options: the throttlers alone, or with settings for them all. */
export type ThrottlerModuleOptions =
  | Array<ThrottlerOptions>
  | {
      ignoreUserAgents?: RegExp[];
      skipIf?: (context: ExecutionContext) => boolean;
      getTracker?: ThrottlerGetTrackerFunction;
      generateKey?: ThrottlerGenerateKeyFunction;
      /** The 429's message: a string, or a function of the refusal. */
      errorMessage?:
        | string
        | ((context: ExecutionContext, throttlerLimitDetail: ThrottlerLimitDetail) => string);
      /**
       * Where hits are counted. Default: in memory ({@link ThrottlerStorageService}). Use
       * `new RateLimitRedisStorage(redis)` to share counts between processes; any other
       * `ThrottlerStorage` is asked once per throttler, not atomically.
       */
      storage?: ThrottlerStorage;
      /** The IPv6 prefix length, in bits, of one client for the default tracker. Default 64. */
      ipv6SubnetPrefix?: number;
      throttlers: Array<ThrottlerOptions>;
      setHeaders?: boolean;
    };

export interface ThrottlerOptionsFactory {
  createThrottlerOptions(): Promise<ThrottlerModuleOptions> | ThrottlerModuleOptions;
}

export interface ThrottlerAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  useExisting?: Type<ThrottlerOptionsFactory>;
  useClass?: Type<ThrottlerOptionsFactory>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the throttler's public type
  useFactory?: (...args: any[]) => Promise<ThrottlerModuleOptions> | ThrottlerModuleOptions;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the throttler's public type
  inject?: any[];
}

/** A refusal, as `throwThrottlingException` and `errorMessage` receive it. */
export interface ThrottlerLimitDetail extends ThrottlerStorageRecord {
  /** **ms**. */
  ttl: number;
  limit: number;
  /** The budget's key (`generateKey`'s). */
  key: string;
  tracker: string;
}

/** One throttler's part of a request, as `handleRequest` receives it. */
export interface ThrottlerRequest {
  context: ExecutionContext;
  limit: number;
  /** **ms**. */
  ttl: number;
  throttler: ThrottlerOptions;
  /** **ms**; 0 = no block. */
  blockDuration: number;
  getTracker: ThrottlerGetTrackerFunction;
  generateKey: ThrottlerGenerateKeyFunction;
}
