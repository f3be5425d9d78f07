/** Injection token of the Redis client the module uses (undefined with a memory or custom store). */
export const RATE_LIMIT_REDIS = Symbol('RATE_LIMIT_REDIS');
/** Injection token of the module options, as given. */
export const RATE_LIMIT_OPTIONS = Symbol('RATE_LIMIT_OPTIONS');
