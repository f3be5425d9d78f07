import type { RateLimitFields } from './fields.js';

/** Pacing before the wall: spacing requests out when the server says little quota is left. */
export interface PacingOptions {
  /**
   * Start spacing requests when the tightest quota has this many units left or fewer (what
   * the client has sent since counts as spent). Default 0: a burst goes out at once while
   * quota lasts, then requests leave one emission interval apart.
   */
  lowWater?: number;
}

/** How long a partition that reported no quota goes unpaced before the next request learns again, ms. */
const RELEARN_MS = 60_000;

interface Partition {
  /** Quota left as last reported, less what was sent since. */
  remaining: number;
  /** When the quota is restored, ms on the client's clock. */
  resetAt: number;
  /** The spacing once low: the policy's emission interval (w / q), else reset / remaining, ms. */
  intervalMs: number;
  /** The earliest the next paced request may leave, ms. */
  nextAt: number;
  /** Requests sent and not answered. */
  inFlight: number;
  /** The first request's answer, while no quota is known: the others wait for it. */
  learning?: Promise<void>;
  learned?: () => void;
}

/**
 * Keeps, per partition (an origin), the tightest quota the server reported, and tells each
 * request how long to wait so that it arrives when quota is there. Advisory: the server
 * decides, and a refusal is still retried per `Retry-After`.
 */
export class Pacer {
  private readonly partitions = new Map<string, Partition>();
  private readonly lowWater: number;

  constructor(
    options: PacingOptions = {},
    private readonly now: () => number = Date.now,
  ) {
    this.lowWater = options.lowWater ?? 0;
    if (!Number.isInteger(this.lowWater) || this.lowWater < 0) {
      throw new RangeError(
        `rate-limit client: pacing.lowWater must be an integer >= 0, got ${String(options.lowWater)}`,
      );
    }
  }

  /**
   * Reserves a send for `partition`: resolves once the request may leave (at once unless the
   * quota is low). While nothing is known of a partition, the first request goes alone and
   * the others wait for its answer, so a burst learns the quota before spending it.
   * @param maxMs the longest this may wait, ms: a longer wait is not started (the request
   *   goes at once), so pacing never spends a request's budget on a wait it cannot finish
   * @returns the ms waited
   */
  async reserve(partition: string, maxMs: number, signal?: AbortSignal | null): Promise<number> {
    let p = this.partitions.get(partition);
    while (p?.learning) {
      await abortable(p.learning, signal);
      p = this.partitions.get(partition);
    }
    const now = this.now();
    if (!p || now >= p.resetAt) {
      let learned!: () => void;
      const learning = new Promise<void>((resolve) => (learned = resolve));
      this.partitions.set(partition, {
        remaining: 0,
        resetAt: Infinity,
        intervalMs: 0,
        nextAt: 0,
        inFlight: 1,
        learning,
        learned,
      });
      return 0;
    }
    let wait = 0;
    if (p.remaining <= this.lowWater) {
      const sendAt = Math.max(
        now,
        p.nextAt,
        p.remaining > 0 ? now : now + Math.min(p.intervalMs, p.resetAt - now),
      );
      // A wait the request's budget cannot cover is not started: it goes now, and the server's
      // answer (a refusal with its Retry-After, most likely) is what the caller gets.
      if (sendAt - now <= maxMs) {
        wait = sendAt - now;
        p.nextAt = sendAt + p.intervalMs;
      }
    }
    if (p.remaining > 0) p.remaining--;
    p.inFlight++;
    if (wait > 0) {
      try {
        await sleep(wait, signal);
      } catch (error) {
        p.inFlight--;
        throw error;
      }
    }
    return wait;
  }

  /**
   * Takes what a response said. Call it once per reserve that resolved, also when the request
   * failed (`fields` undefined).
   */
  observe(partition: string, fields: RateLimitFields | undefined): void {
    const p = this.partitions.get(partition);
    if (!p) return;
    p.inFlight = Math.max(0, p.inFlight - 1);
    const q = fields?.tightest;
    const now = this.now();
    if (q !== undefined) {
      p.remaining = Math.max(0, q.remaining - p.inFlight);
      p.resetAt = now + q.resetSeconds * 1000;
      p.intervalMs =
        q.limit !== undefined && q.limit > 0 && q.windowSeconds !== undefined
          ? (q.windowSeconds * 1000) / q.limit
          : (q.resetSeconds * 1000) / (q.remaining + 1);
    }
    if (fields?.retryAfterMs !== undefined) {
      // Nothing leaves before the server said it may: later requests queue behind it.
      p.remaining = 0;
      p.nextAt = Math.max(p.nextAt, now + fields.retryAfterMs);
      p.resetAt = Math.max(p.resetAt, p.nextAt);
    }
    if (p.learning) {
      // No answer: the next request learns again.
      if (fields === undefined) this.partitions.delete(partition);
      else if (q === undefined && fields.retryAfterMs === undefined) {
        // No quota reported (or no answer): nothing to pace by. Learn again in a while rather
        // than hold every request behind the one before.
        p.remaining = Infinity;
        p.resetAt = now + RELEARN_MS;
      }
      const learned = p.learned!;
      p.learning = p.learned = undefined;
      learned();
    }
  }
}

/** Resolves after `ms`; rejects with the signal's reason at once when it aborts. */
export function sleep(ms: number, signal?: AbortSignal | null): Promise<void> {
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

function abortable(promise: Promise<void>, signal?: AbortSignal | null): Promise<void> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, reject);
  });
}
