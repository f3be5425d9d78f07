/**
 * Abortable waits of any length, for the client's pacing and retries: `setTimeout` alone
 * caps a delay at 2^31 − 1 ms (about 24.8 days) and fires a longer one at once, and an
 * aborted request must stop waiting at once. Durations in ms.
 */

/** setTimeout's longest delay (2^31 − 1 ms); a longer sleep is made of several. */
const MAX_TIMER_MS = 2_147_483_647;

/** Resolves after `ms` (any length); rejects with the signal's reason at once when it aborts. */
export async function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
  for (let left = ms; left > 0; left -= MAX_TIMER_MS) {
    await sleepOnce(Math.min(left, MAX_TIMER_MS), signal);
  }
  if (signal?.aborted) throw signal.reason as Error;
}

function sleepOnce(ms: number, signal?: AbortSignal | null): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** True when `promise` settles within `ms`; false when the time runs out first. */
export function settlesWithin(
  promise: Promise<void>,
  ms: number,
  signal?: AbortSignal | null,
): Promise<boolean> {
  if (signal?.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const done = (value: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(value);
    };
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    const timer = setTimeout(() => done(false), ms);
    signal?.addEventListener('abort', onAbort, { once: true });
    promise.then(
      () => done(true),
      () => done(true),
    );
  });
}
