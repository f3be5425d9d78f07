/**
 * The work behind the overload part's routes, and its shape: what the app (app.ts) does per
 * request and what the orchestrator (index.ts) needs to know of it. No Nest here.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * `cpu`: a busy loop of {@link CPU_MS} per request (a CPU-bound handler: one core serves at most
 * 1000 / CPU_MS req/s, less Nest's own cost). `pool`: {@link POOL_HOLD_MS} holding one of
 * {@link POOL_SIZE} connections of a pool (a database behind a small pool: the event loop
 * idles while requests queue for a connection, about POOL_SIZE * 1000 / POOL_HOLD_MS req/s).
 */
export const WORKS = ['cpu', 'pool'] as const;
export type Work = (typeof WORKS)[number];

export const CPU_MS = 2;
export const POOL_SIZE = 4;
export const POOL_HOLD_MS = 5;

/**
 * The static `@ConcurrencyLimit` per work: about what keeps the work busy without a queue
 * (one core runs one busy loop at a time; a pool of 4 holds 4), with a little room for the
 * requests between two turns. A user sizing a static limit by hand would pick about this.
 */
export const STATIC_LIMITS: Record<Work, number> = { cpu: 4, pool: 2 * POOL_SIZE };

/** Spins for `ms` milliseconds of this thread's time, as a handler that computes would. */
export function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/** A connection pool of `size`: `use` waits in FIFO order for a free connection, then holds it. */
export class Pool {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(size: number) {
    this.free = size;
  }

  /** Holds a connection for `holdMs` ms (a query), after waiting for one as long as it takes. */
  async use(holdMs: number): Promise<void> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      await sleep(holdMs);
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}
