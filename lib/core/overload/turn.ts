import type { OverloadClock } from './clock.js';

/**
 * How much of an admitted call's loop time a shed call may cost at most for the turn's
 * budget to shed: shedding a call shortens the turn by what it saves, so a shed call that
 * costs as much as the call it refuses (a trivial handler, whose 503 costs what its answer
 * does) bounds no wait, and refuses a call for nothing.
 */
const SHED_SAVING = 0.5;

/** The weight of each new gap in the moving mean of an admitted call's cost. */
const COST_ALPHA = 1 / 16;

/**
 * How many shed calls' gaps are seen before their cost is judged: the first of a process
 * runs cold code (its 503 path compiles), measured at 9 ms against a warm 0.3 on Express.
 */
const SHED_SAMPLES = 4;

/**
 * Over how many of the latest shed calls' gaps their least is taken: a lifetime least would
 * let one gap shorter than any 503 (a clock read between two callbacks of one answer) hold
 * the cost rule off for good; this one ages out after as many more shed calls.
 */
const SHED_WINDOW = 16;

/**
 * How long a shed call's gap counts, in **ms**. Once the latest gaps say a 503 costs too much,
 * the rule stops shedding, so no shed call tells it when that changes (the 503s grew cheap
 * again: a dear gap from a collection or a cold path ages in as well as out); after this long
 * it learns again from {@link SHED_SAMPLES} shed calls, which costs a few 503s every few
 * seconds where they do not pay.
 */
const SHED_MEMORY_MS = 5000;

/**
 * How long the event loop's current turn has been busy: from the first call admitted or
 * shed in it (one clock read per call), until a `setImmediate` scheduled by that first call
 * runs, which Node does once the turn's I/O callbacks are over. A call seen when the turn has
 * been busy for `t` ms was ready when the turn began (libuv takes the sockets ready at the
 * start of its poll phase) and has waited at least `t` ms behind the calls run before it: the
 * queue a synchronous handler builds, which no concurrency limit sees (a CPU-bound handler is
 * never more than one call in flight). Shedding on it bounds that wait per call, as CoDel
 * bounds a packet's time in a queue, with no window to swing on.
 *
 * It also learns what a call costs the turn, by outcome: the gap from one call to the next
 * in the same turn (its handler, when synchronous, and its answer): a moving mean for the
 * admitted calls, the least of the latest for the shed ones (a cold or collected gap is only
 * ever longer), so that the budget sheds only where shedding shortens the turn
 * ({@link LoopTurn.shedPays}).
 */
export class LoopTurn {
  private startedAt: number | undefined;
  /** The last call of the turn: when it was seen, and whether it was shed (undefined: neither). */
  private lastAt: number | undefined;
  private lastShed: boolean | undefined;
  private lastRank = 0;
  /**
   * The moving mean of the gaps after an admitted call, ms, per priority's rank (see
   * `rankOf`); NaN until seen. Per priority: a cheap route's calls of one priority must not
   * make shedding look useless for the dear calls of another (the budget would then stop
   * shedding those, and shed the cheap ones of a higher priority in their place).
   */
  private readonly admittedCost = [NaN, NaN, NaN, NaN];
  /**
   * The latest {@link SHED_WINDOW} gaps after a shed call, ms, and when each was seen (a ring;
   * -Infinity: none yet), and how many were seen.
   */
  private readonly shedGapMs = new Array<number>(SHED_WINDOW).fill(Infinity);
  private readonly shedGapAt = new Array<number>(SHED_WINDOW).fill(-Infinity);
  private shedGaps = 0;
  private readonly over = () => {
    this.startedAt = undefined;
    this.lastAt = undefined;
  };

  constructor(private readonly clock: OverloadClock) {}

  /** How long the current turn has been busy, in **ms** (0 for its first call). */
  busyMs(): number {
    const now = this.clock.now();
    if (this.startedAt === undefined) {
      this.startedAt = now;
      this.lastAt = now;
      this.lastShed = undefined;
      this.clock.setImmediate(this.over);
      return 0;
    }
    if (this.lastAt !== undefined && this.lastShed !== undefined) {
      const gap = now - this.lastAt;
      if (this.lastShed) {
        this.shedGapMs[this.shedGaps % SHED_WINDOW] = gap;
        this.shedGapAt[this.shedGaps % SHED_WINDOW] = now;
        this.shedGaps++;
      } else {
        this.admittedCost[this.lastRank] = mean(this.admittedCost[this.lastRank]!, gap);
      }
    }
    this.lastAt = now;
    this.lastShed = undefined;
    return now - this.startedAt;
  }

  /**
   * How the call just timed by {@link LoopTurn.busyMs} went: `true` shed, `false` admitted,
   * undefined neither (it waits in a queue); `rank` its priority's (see `rankOf`).
   */
  settled(shed: boolean | undefined, rank: number): void {
    this.lastShed = shed;
    this.lastRank = rank;
  }

  /**
   * Whether a shed call costs the turn at most {@link SHED_SAVING} of an admitted one of the
   * priority of `rank` (the least of the latest gaps after a shed call, seen in the last
   * {@link SHED_MEMORY_MS}, against the mean after an admitted one of that priority); true
   * while fewer than {@link SHED_SAMPLES} such gaps or no admitted one of that priority have
   * been seen (the first calls shed teach what a shed costs). Once false, it is true again
   * when those admitted calls grow dearer (a heavier handler), or when the gaps it went by
   * are too old to count.
   */
  shedPays(rank: number): boolean {
    const admitted = this.admittedCost[rank]!;
    if (Number.isNaN(admitted)) return true;
    const since = this.clock.now() - SHED_MEMORY_MS;
    let recent = 0;
    let least = Infinity;
    for (let k = 0; k < SHED_WINDOW; k++) {
      if (this.shedGapAt[k]! <= since) continue;
      recent++;
      least = Math.min(least, this.shedGapMs[k]!);
    }
    return recent < SHED_SAMPLES || least <= SHED_SAVING * admitted;
  }
}

function mean(previous: number, gap: number): number {
  return Number.isNaN(previous) ? gap : previous + (gap - previous) * COST_ALPHA;
}
