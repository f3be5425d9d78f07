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

// Node's own, taken when this module loads: a test runner's fake timers installed later
// (Jest's legacy ones, or modern ones with a real `performance`) would otherwise never end a
// turn, and every call after the first would be seen in one endless turn and shed.
const { setImmediate: nodeSetImmediate } = globalThis;
const { now: performanceNow } = performance;

/** Node's clock and timers. */
export const SYSTEM_CLOCK: OverloadClock = {
  now: () => performanceNow.call(performance),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  setImmediate: (callback) => {
    nodeSetImmediate(callback);
  },
};
