// The metadata keys and the options token, spelled as @nestjs/throttler spells them, so that
// metadata written by either package reads the same and a test that overrides the options
// token (`overrideProvider(THROTTLER_OPTIONS)`) keeps working.

/** Metadata key prefix of a route's `limit` per throttler (`THROTTLER:LIMIT<name>`). */
export const THROTTLER_LIMIT = 'THROTTLER:LIMIT';
/** Metadata key prefix of a route's `ttl` (**ms**) per throttler. */
export const THROTTLER_TTL = 'THROTTLER:TTL';
/** Metadata key prefix of a route's `getTracker` per throttler. */
export const THROTTLER_TRACKER = 'THROTTLER:TRACKER';
/** Metadata key prefix of a route's `blockDuration` (**ms**) per throttler. */
export const THROTTLER_BLOCK_DURATION = 'THROTTLER:BLOCK_DURATION';
/** Metadata key prefix of a route's `generateKey` per throttler. */
export const THROTTLER_KEY_GENERATOR = 'THROTTLER:KEY_GENERATOR';
/** The injection token of the module options (`getOptionsToken()`). */
export const THROTTLER_OPTIONS = 'THROTTLER:MODULE_OPTIONS';
/** Metadata key prefix of `@SkipThrottle` per throttler (`THROTTLER:SKIP<name>`). */
export const THROTTLER_SKIP = 'THROTTLER:SKIP';
