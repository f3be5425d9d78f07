/**
 * Time, timers and the end of the event loop's turn, injected so that tests step them.
 * Durations in **ms**.
 */
export interface OverloadClock {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Runs `callback` once the event loop's current turn is over (Node's `setImmediate`). */
  setImmediate(callback: () => void): void;
}

/** Node's clock and timers. */
export const SYSTEM_CLOCK: OverloadClock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  setImmediate: (callback) => {
    setImmediate(callback);
  },
};
