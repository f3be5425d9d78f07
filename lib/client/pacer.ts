import type { RateLimitFields } from './fields.js';
import { clientOptionError } from './option-error.js';
import { freshWindowEnd, nextProbeMs, PROBE_MS } from './reset-estimate.js';
import { settlesWithin, sleep } from './timers.js';

/** Pacing before the wall: spacing requests out when the server says little quota is left. */
export interface PacingOptions {
  /**
   * Start spacing requests when the tightest quota has this many units left or fewer (what
   * the client has sent since counts as spent). Default 0: a burst goes out at once while
   * quota lasts; then, from the reset on, requests leave one emission interval (w / q, plus 5%)
   * apart, or, when the server states no window, one learns what is back and the rest wait
   * for its answer.
   */
  lowWater?: number;
}

/**
 * How long a partition that reported no quota goes unpaced before a request learns again, ms;
 * also how long after a refusal that said nothing of the quota requests go one at a time.
 */
const RELEARN_MS = 60_000;
/**
 * Paced requests leave this much wider apart than the emission interval (w / q): exactly one
 * interval apart, every (q + 1)th lands on the edge of the server's window and may be refused.
 */
const INTERVAL_MARGIN = 1.05;
/** The longest a request waits for the first answer of a partition it knows nothing of, ms. */
const LEARN_WAIT_MS = 2000;
/** A request unanswered for this long no longer counts as in flight (its answer was lost), ms. */
const STALE_MS = 60_000;
/** Partitions kept; beyond, the least recently used goes. */
const MAX_PARTITIONS = 1000;

interface Partition {
  readonly name: string;
  /** Quota left as last reported, less what was sent since; Infinity when none was reported. */
  remaining: number;
  /** When the quota is restored (or the partition is learnt again), ms on the client's clock. */
  resetAt: number;
  /** Whether the server stated `resetAt` (else it is a re-learn or probe time of the client's). */
  resetStated: boolean;
  /** The policy's emission interval (w / q), the least spacing once low, ms (0: unknown). */
  intervalMs: number;
  /** The earliest the next paced request may leave, ms. */
  nextAt: number;
  /** Requests sent and not answered: ticket → when sent, ms. */
  inFlight: Map<number, number>;
  /** The first request's answer, while nothing is known: the others wait for it (bounded). */
  learning?: Promise<void>;
  learned?: () => void;
  /**
   * Until when an answer without quota fields lets only the next request go, ms: the server
   * refused without saying what it allows, so what it allows is learnt one request at a time.
   */
  blindUntil: number;
  /** The end of the window a fresh window's answer showed, to the ms (see freshWindowEnd). */
  windowEnd?: number;
  /** The reset this partition was opened at when it was such a refined end, ms. */
  refinedEnd?: number;
  /** Set once a refined end proved early (the window outlasted it): resets are taken as sent. */
  noRefine: boolean;
  /** The wait before the next probe of a quota spent with no reset, ms. */
  probeMs: number;
  /** The budget of the request that opened the partition, ms: no probe waits longer. */
  maxWaitMs: number;
}

/** A reserved send; give it back to {@link Pacer.observe} with what came of it. */
export interface Ticket {
  readonly partition: string;
  readonly id: number;
  /** ms waited for it, pacing included. */
  readonly waitedMs: number;
}

/**
 * Keeps, per partition (by default a URL's origin and path), the tightest quota the server
 * reported, and tells each request how long to wait so that it arrives when quota is there.
 * Advisory: the server decides, and a refusal is still retried per `Retry-After`.
 */
export class Pacer {
  private readonly partitions = new Map<string, Partition>();
  private readonly lowWater: number;
  private tickets = 0;

  constructor(
    options: PacingOptions = {},
    private readonly now: () => number = Date.now,
  ) {
    this.lowWater = options.lowWater ?? 0;
    if (!Number.isInteger(this.lowWater) || this.lowWater < 0) {
      throw clientOptionError(
        `pacing.lowWater must be an integer >= 0, got ${String(options.lowWater)}`,
      );
    }
  }

  /** Partitions held (for tests). */
  get size(): number {
    return this.partitions.size;
  }

  /** Whether `partition` is held (for tests). */
  holds(partition: string): boolean {
    return this.partitions.has(partition);
  }

  /**
   * Reserves a send in `partition`: resolves once the request may leave (at once unless the
   * quota is low). While nothing is known of a partition, the first request goes alone and the
   * others wait for its answer, so a burst learns the quota before spending it; a learner
   * unanswered after 2 s is followed by one more, never by all who wait.
   * The same holds at each reset the client waits for when the server stated no window (no
   * `w`): one request learns what is back, the others wait for its answer.
   * @param maxMs the longest this may wait, ms: a longer pacing wait is not started (the
   *   request goes at once), so pacing never spends a request's budget on a wait it cannot finish
   * @throws the signal's reason when it aborts a wait
   */
  async reserve(partition: string, maxMs: number, signal?: AbortSignal | null): Promise<Ticket> {
    const started = this.now();
    const budget = () => maxMs - (this.now() - started);
    for (;;) {
      let p = this.partitions.get(partition);
      // At most 2 s for each learner's answer (one at a time, several may come in turn). A
      // learner still unanswered then is followed by one more, not by everyone waiting: its
      // partition knows no reset (nothing to wait for), so they would all leave at once.
      let learner: Promise<void> | undefined;
      let learnFrom = 0;
      while (p?.learning) {
        if (p.learning !== learner) [learner, learnFrom] = [p.learning, this.now()];
        const left = Math.min(budget(), LEARN_WAIT_MS - (this.now() - learnFrom));
        const answered = left > 0 && (await settlesWithin(p.learning, left, signal));
        if (!answered && budget() <= 0) break;
        const current = this.partitions.get(partition);
        if (!answered && current === p && p.learning === learner) {
          return this.learnAgain(p, maxMs, started);
        }
        p = current;
      }
      const now = this.now();
      const id = ++this.tickets;
      // Past the reset, some quota is back, but how much only the server knows (the drafts: a
      // client MUST NOT assume it is all restored): learn it again from one request.
      if (!p || (now >= p.resetAt && !p.learning)) {
        this.open(partition, maxMs, p).inFlight.set(id, now);
        return { partition, id, waitedMs: now - started };
      }
      // Most recently used last: the first in the map is the one to drop.
      this.partitions.delete(partition);
      this.partitions.set(partition, p);
      if (p.remaining === 0 && p.intervalMs === 0 && p.resetAt - now <= budget()) {
        // None left and no window stated, so no spacing is known: wait for the reset, where one
        // request learns what is back and the others wait for its answer, not a herd.
        await sleep(p.resetAt - now, signal);
        continue;
      }
      return this.take(p, id, now, started, budget(), signal);
    }
  }

  /**
   * Sends one more learner in `p`, whose learner went unanswered: its answer, or the late one
   * of the learner before it, releases those waiting.
   */
  private learnAgain(p: Partition, maxMs: number, started: number): Ticket {
    const before = p.learned!;
    let learned!: () => void;
    p.learning = new Promise<void>((resolve) => (learned = resolve));
    p.learned = () => {
      before();
      learned();
    };
    p.maxWaitMs = maxMs;
    const now = this.now();
    const id = ++this.tickets;
    p.inFlight.set(id, now);
    this.partitions.delete(p.name);
    this.partitions.set(p.name, p);
    return { partition: p.name, id, waitedMs: now - started };
  }

  /** Takes a unit of `p`'s quota for ticket `id`, waiting for it when it is low. */
  private async take(
    p: Partition,
    id: number,
    now: number,
    started: number,
    budget: number,
    signal?: AbortSignal | null,
  ): Promise<Ticket> {
    let wait = 0;
    const before = p.nextAt;
    if (p.remaining <= this.lowWater) {
      // None left: nothing is sure to come back before the reset (a window's quota does not),
      // so the next request waits for it. A few left: spread over the time until the reset, and
      // never closer than the policy's emission interval.
      const sendAt =
        p.remaining === 0 ? Math.max(now, p.nextAt, p.resetAt) : Math.max(now, p.nextAt);
      if (sendAt - now <= budget) {
        wait = sendAt - now;
        const spread = p.remaining > 0 ? (p.resetAt - sendAt) / (p.remaining + 1) : 0;
        p.nextAt = sendAt + Math.max(p.intervalMs, spread);
      }
    }
    const queued = p.nextAt;
    const took = p.remaining > 0;
    if (took) p.remaining--;
    // The last unit of a quota with no stated reset: probe soon rather than at the re-learn time.
    if (took && p.remaining === 0 && !p.resetStated)
      p.resetAt = Math.min(p.resetAt, now + p.probeMs);
    p.inFlight.set(id, now);
    if (wait > 0) {
      try {
        await sleep(wait, signal);
      } catch (error) {
        // Aborted: its count and, when no later request queued behind it, its place go back.
        p.inFlight.delete(id);
        if (p.nextAt === queued) p.nextAt = before;
        if (took) p.remaining++;
        throw error;
      }
    }
    return { partition: p.name, id, waitedMs: this.now() - started };
  }

  /**
   * Takes what came of a reserved send: the response's fields, whether it was refused (a status
   * the client retries: only then does its `Retry-After` hold the partition back), or nothing
   * when the request failed. Call it once per ticket.
   */
  observe(ticket: Ticket, fields: RateLimitFields | undefined, refused = false): void {
    const p = this.partitions.get(ticket.partition);
    const sentAt = p?.inFlight.get(ticket.id);
    if (!p || sentAt === undefined) return;
    p.inFlight.delete(ticket.id);
    const now = this.now();
    const q = fields?.tightest;
    if (q !== undefined) {
      const reset = q.resetSeconds * 1000;
      // A learner sent at a refined end and refused, or shown the same window: the window
      // outlasted the whole seconds it was taken to last, so resets are taken as sent from now.
      // Only the learner's answer tells: those after it see the same window, spent further.
      const early = refused || (q.limit !== undefined && q.remaining !== q.limit - 1);
      if (p.refinedEnd !== undefined && sentAt >= p.refinedEnd && early) p.noRefine = true;
      p.refinedEnd = undefined;
      p.remaining = Math.max(0, q.remaining - this.pending(p, now));
      p.resetStated = reset > 0;
      // No reset reported (0, or X-RateLimit-* without one): with some left, nothing to wait
      // for, only to count; with none, a probe soon (a reset never stated is never waited for),
      // each probe that finds none left waiting twice as long for the next.
      const spent = reset <= 0 && q.remaining === 0;
      p.resetAt = now + (reset > 0 ? reset : p.remaining === 0 ? p.probeMs : RELEARN_MS);
      p.probeMs = nextProbeMs(p.probeMs, spent, p.maxWaitMs);
      const windowEnd = reset > 0 && !p.noRefine ? freshWindowEnd(q, now, sentAt) : undefined;
      if (windowEnd !== undefined && windowEnd < p.resetAt) p.windowEnd = windowEnd;
      // The same window's reset, rounded up: keep it to the ms.
      if (p.windowEnd !== undefined && p.resetAt >= p.windowEnd && p.resetAt < p.windowEnd + 1000) {
        p.resetAt = p.windowEnd;
      }
      p.intervalMs =
        q.limit !== undefined && q.limit > 0 && q.windowSeconds !== undefined
          ? ((q.windowSeconds * 1000) / q.limit) * INTERVAL_MARGIN
          : 0;
    } else if (p.learning && (fields !== undefined || refused)) {
      // An answer without quota fields: nothing to pace by. Learn again in a while rather than
      // hold every request behind the one before; but after such a refusal, what the server
      // allows is learnt one request at a time: the next goes now, the others wait for it.
      p.remaining = now < p.blindUntil ? 0 : Infinity;
      p.resetStated = false;
      p.resetAt = now < p.blindUntil ? now : now + RELEARN_MS;
    }
    if (refused && fields?.retryAfterMs !== undefined) {
      // Nothing leaves before the server said it may: later requests queue behind it. A reset
      // of the client's own (re-learn, probe) never outlasts the Retry-After.
      p.remaining = 0;
      p.nextAt = Math.max(p.nextAt, now + fields.retryAfterMs);
      p.resetAt = p.resetStated ? Math.max(p.resetAt, p.nextAt) : p.nextAt;
      if (q === undefined) p.blindUntil = now + RELEARN_MS;
    }
    if (p.learning) {
      const learned = p.learned!;
      p.learning = p.learned = undefined;
      // No answer at all: the next request learns again.
      if (fields === undefined && !refused) this.partitions.delete(ticket.partition);
      learned();
    }
  }

  /** Requests of `p` still in flight, forgetting those unanswered for too long. */
  private pending(p: Partition, now: number): number {
    for (const [id, sentAt] of p.inFlight) if (now - sentAt > STALE_MS) p.inFlight.delete(id);
    return p.inFlight.size;
  }

  /** A partition learning from one request; after `old`, keeping what outlasts a reset. */
  private open(partition: string, maxWaitMs: number, old?: Partition): Partition {
    let learned!: () => void;
    const learning = new Promise<void>((resolve) => (learned = resolve));
    const p: Partition = {
      name: partition,
      remaining: 0,
      resetAt: Infinity,
      resetStated: false,
      intervalMs: 0,
      nextAt: 0,
      inFlight: new Map(),
      learning,
      learned,
      blindUntil: old?.blindUntil ?? 0,
      refinedEnd:
        old?.windowEnd !== undefined && old.resetAt === old.windowEnd ? old.resetAt : undefined,
      noRefine: old?.noRefine ?? false,
      probeMs: old?.probeMs ?? PROBE_MS,
      maxWaitMs,
    };
    this.partitions.delete(partition);
    this.partitions.set(partition, p);
    if (this.partitions.size > MAX_PARTITIONS) {
      const [oldest, dropped] = this.partitions.entries().next().value as [string, Partition];
      this.partitions.delete(oldest);
      // Whoever waits on it goes on.
      dropped.learned?.();
    }
    return p;
  }
}
