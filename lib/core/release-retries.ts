import type { Lease } from './stores/store.js';

/** The most leases kept for a retry; past it, those that expire first are dropped. */
export const MAX_KEPT_RELEASES = 10_000;

/** How often, in **ms**, kept releases are tried again while the store does not answer. */
export const RELEASE_RETRY_MS = 1000;

/**
 * Releases that did not reach the store (it was down, or did not answer in time), kept by
 * lease id and sent again until it answers (issue 22, finding 4): a slot given back while
 * the store was unreachable is freed once it is back, not after its lease. A lease is dropped
 * once it would have expired anyway (its `leaseMs` after it was taken, on `clock`), and the
 * ones that expire first when more than `max` are kept. A retry is idempotent: giving a lease
 * back twice frees one slot, so a release that did land after its timeout costs nothing more.
 *
 * Retried every `retryMs` on an unref'd timer while some are kept, and at once when
 * {@link ReleaseRetries.storeAnswered} reports that a request's store call succeeded.
 */
export class ReleaseRetries {
  /** By `<key>\n<id>`, in the order they were kept (about the order they expire). */
  private readonly kept = new Map<string, { lease: Lease; dropAt: number }>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private sending = false;
  private closed = false;

  /**
   * @param send gives leases back to the store, bounded in time; rejects when it failed
   * @param clock the time in **ms** the drop times are read on (`Date.now`; tests inject one)
   * @param retryMs the wait between attempts, in **ms**
   * @param max the most leases kept
   */
  constructor(
    private readonly send: (leases: readonly Lease[]) => Promise<unknown>,
    private readonly clock: () => number = Date.now,
    private readonly retryMs: number = RELEASE_RETRY_MS,
    private readonly max: number = MAX_KEPT_RELEASES,
  ) {}

  /** How many leases wait for the store. */
  get size(): number {
    return this.kept.size;
  }

  /**
   * Keeps `leases`, taken at `takenAt` (ms on `clock`), for a retry. A lease without
   * `leaseMs` (a store of your own that gave none) is kept for {@link RELEASE_RETRY_MS} × 30.
   */
  keep(leases: readonly Lease[], takenAt: number): void {
    if (this.closed) return;
    for (const lease of leases) {
      const dropAt = takenAt + (lease.leaseMs ?? RELEASE_RETRY_MS * 30);
      this.kept.set(`${lease.key}\n${lease.id}`, { lease, dropAt });
    }
    while (this.kept.size > this.max) this.kept.delete(this.kept.keys().next().value!);
    this.schedule();
  }

  /** A request's store call succeeded: the store is back, so the kept ones go now. */
  storeAnswered(): void {
    if (this.kept.size > 0 && !this.sending) void this.retry();
  }

  /** Stops retrying and forgets what is kept (at shutdown: the store is being closed). */
  close(): void {
    this.closed = true;
    this.kept.clear();
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One attempt for every live lease kept; the ones it could not give back stay. */
  async retry(): Promise<void> {
    if (this.sending) return;
    const now = this.clock();
    const batch: Lease[] = [];
    for (const [id, { lease, dropAt }] of this.kept) {
      if (dropAt <= now) this.kept.delete(id);
      else batch.push(lease);
    }
    if (batch.length === 0) return;
    this.sending = true;
    try {
      await this.send(batch);
      for (const lease of batch) this.kept.delete(`${lease.key}\n${lease.id}`);
    } catch {
      // Still down: kept for the next attempt (or until they expire).
    } finally {
      this.sending = false;
      this.schedule();
    }
  }

  private schedule(): void {
    if (this.closed || this.timer !== undefined || this.kept.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.retry();
    }, this.retryMs);
    // Nothing to wait for at exit: a lease left expires on the store's clock.
    this.timer.unref?.();
  }
}
