// Durations in **milliseconds**, as the throttler's `ttl` and `blockDuration` take them (v6).

/** `howMany` seconds, in **ms**. */
export const seconds = (howMany: number): number => howMany * 1000;
/** `howMany` minutes, in **ms**. */
export const minutes = (howMany: number): number => 60 * howMany * seconds(1);
/** `howMany` hours, in **ms**. */
export const hours = (howMany: number): number => 60 * howMany * minutes(1);
/** `howMany` days, in **ms**. */
export const days = (howMany: number): number => 24 * howMany * hours(1);
/** `howMany` weeks, in **ms**. */
export const weeks = (howMany: number): number => 7 * howMany * days(1);
