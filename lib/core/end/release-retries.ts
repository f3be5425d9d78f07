import type { Lease } from '../stores/store.js';

/** The most leases kept for a retry; past it, those that expire first are dropped. */
const MAX_KEPT_RELEASES = 10_000;

/** How often, in **ms**, kept releases are tried again while the store does not answer. */
const RELEASE_RETRY_MS = 1000;

/**
 * The most leases one retry call carries: each call is bounded by `timeoutMs`, so thousands
 * kept during an outage go as many small calls at once, and one slow call keeps only its own
 * (one call for 5,000 leases timed out as a whole, and again every second).
 */
const RELEASE_RETRY_BATCH = 100;

/**
 * Releases that did not reach the store (it was down, or did not answer in time), kept by
 * lease id and sent again until it answers: a slot given back while
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
  /** The attempt under way, if any. */
  private sending: Promise<void> | undefined;
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
    if (this.kept.size > 0 && this.sending === undefined) void this.retry();
  }

  /** Stops retrying and forgets what is kept (at shutdown: the store is being closed). */
  close(): void {
    this.closed = true;
    this.kept.clear();
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * One attempt for every live lease kept, in calls of at most {@link RELEASE_RETRY_BATCH}
   * sent together; the leases of a call that failed stay. Resolves when the attempt under way
   * (this one, or one already started) has ended.
   */
  retry(): Promise<void> {
    this.sending ??= this.attempt().finally(() => {
      this.sending = undefined;
      this.schedule();
    });
    return this.sending;
  }

  private async attempt(): Promise<void> {
    const now = this.clock();
    const batches: Lease[][] = [];
    for (const [id, { lease, dropAt }] of this.kept) {
      if (dropAt <= now) {
        this.kept.delete(id);
        continue;
      }
      const last = batches.at(-1);
      if (last !== undefined && last.length < RELEASE_RETRY_BATCH) last.push(lease);
      else batches.push([lease]);
    }
    await Promise.all(
      batches.map((batch) =>
        Promise.resolve(batch)
          .then(this.send)
          .then(
            () => batch.forEach((lease) => this.kept.delete(`${lease.key}\n${lease.id}`)),
            // Still down: kept for the next attempt (or until they expire).
            () => undefined,
          ),
      ),
    );
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
