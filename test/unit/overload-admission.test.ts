/**
 * Admission by priority against a limit, on a clock the test steps: its timers run only
 * when the test moves time past them.
 */
import { describe, expect, it } from '@jest/globals';
import type { Ticket } from '../../lib/core/overload/admission.js';
import type { OverloadClock } from '../../lib/core/overload/clock.js';
import { overloadSettings } from '../../lib/core/overload/options.js';
import { OverloadProtection, type SheddingEpisode } from '../../lib/core/overload/protection.js';
import type { OverloadOptions, Priority } from '../../lib/index.js';

class SteppedClock implements OverloadClock {
  private at = 0;
  timers: { due: number; run: () => void }[] = [];
  now = () => this.at;
  setTimeout = (run: () => void, ms: number) => {
    const timer = { due: this.at + ms, run };
    this.timers.push(timer);
    return timer;
  };
  clearTimeout = (handle: unknown) => {
    this.timers = this.timers.filter((t) => t !== handle);
  };
  private immediates: (() => void)[] = [];
  setImmediate = (run: () => void) => {
    this.immediates.push(run);
  };
  /** Moves time by `ms` within the event loop's turn: synchronous work, no timer runs. */
  work(ms: number): void {
    this.at += ms;
  }
  /**
   * Ends the event loop's turn (its `setImmediate` callbacks run), then moves time by `ms`,
   * running the timers that fall due, in order.
   */
  advance(ms: number): void {
    for (const run of this.immediates.splice(0)) run();
    const until = this.at + ms;
    for (;;) {
      const next = this.timers.filter((t) => t.due <= until).sort((a, b) => a.due - b.due)[0];
      if (next === undefined) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.at = next.due;
      next.run();
    }
    this.at = until;
  }
}

/** A protection whose process pool's limit is fixed at `limit`. */
/**
 * Two windows of a loop fully busy with calls, so that the turn's budget applies (it waits for
 * two in a row), then the end of the turn.
 */
function busyLoop(protection: OverloadProtection, clock: SteppedClock): void {
  for (let i = 0; i < 2; i++) {
    (protection.acquire('critical') as Ticket).drop();
    protection.update(0, 1);
  }
  clock.advance(0);
}

function fixed(limit: number, options: OverloadOptions = {}) {
  const clock = new SteppedClock();
  const episodes: { started: boolean; episode: SheddingEpisode }[] = [];
  const shed: Priority[] = [];
  const protection = new OverloadProtection(
    overloadSettings({ initialLimit: limit, minLimit: limit, maxLimit: limit, ...options })!,
    {
      shed: (_pool, priority) => shed.push(priority),
      sheddingStarted: (episode) => episodes.push({ started: true, episode }),
      sheddingStopped: (episode) => episodes.push({ started: false, episode }),
    },
    clock,
  );
  return { clock, protection, episodes, shed };
}

const admitted = (t: unknown): Ticket => {
  expect(t).toBeDefined();
  expect(t).not.toBeInstanceOf(Promise);
  return t as Ticket;
};

describe('admission by priority', () => {
  it('at the limit sheds sheddable, normal and high; critical passes up to criticalCap × the limit', () => {
    const { protection } = fixed(2);
    const held = [protection.acquire('sheddable'), protection.acquire('normal')].map(admitted);
    expect(protection.acquire('sheddable')).toBeUndefined();
    expect(protection.acquire('normal')).toBeUndefined();
    expect(protection.acquire('high')).toBeUndefined();
    admitted(protection.acquire('critical'));
    admitted(protection.acquire('critical'));
    // The hard cap: ceil(2 × 2) = 4 in flight.
    expect(protection.acquire('critical')).toBeUndefined();
    const critical = [protection.acquire('critical')];
    held[0]!.end();
    // Critical calls take room under the limit too: 3 in flight, none for a sheddable one.
    expect(critical[0]).toBeUndefined();
    expect(protection.acquire('sheddable')).toBeUndefined();
    expect(protection.pool()!.inFlight).toEqual([0, 1, 0, 2]);
  });

  it('queues high and normal calls up to queueMs, high first, and never sheddable ones', async () => {
    const { protection, clock } = fixed(1, { queueMs: 50 });
    const first = admitted(protection.acquire('normal'));
    const normal = protection.acquire('normal') as Promise<Ticket | undefined>;
    const high = protection.acquire('high') as Promise<Ticket | undefined>;
    expect(normal).toBeInstanceOf(Promise);
    expect(protection.acquire('sheddable')).toBeUndefined();
    expect(protection.pool()!.waiting).toBe(2);
    clock.advance(10);
    first.end();
    const highTicket = await high;
    expect(highTicket?.priority).toBe('high');
    // The normal call waits on; its 50 ms run out before another slot frees.
    clock.advance(40);
    expect(await normal).toBeUndefined();
    expect(protection.pool()!.waiting).toBe(0);
  });

  it('close (at shutdown) sheds every waiting call at once and clears its timer', async () => {
    const { protection, clock, shed } = fixed(1, { queueMs: 10_000 });
    admitted(protection.acquire('critical'));
    const normal = protection.acquire('normal') as Promise<Ticket | undefined>;
    const high = protection.acquire('high') as Promise<Ticket | undefined>;
    expect(clock.timers).toHaveLength(2);
    protection.close();
    expect(await normal).toBeUndefined();
    expect(await high).toBeUndefined();
    expect(protection.pool()!.waiting).toBe(0);
    expect(clock.timers).toEqual([]);
    expect(shed).toEqual(['normal', 'high']);
  });

  it('a full queue sheds its newest call of a lower priority for a newcomer, else the newcomer', async () => {
    const { protection, shed } = fixed(1, { queueMs: 1000, maxQueued: 2 });
    admitted(protection.acquire('critical'));
    admitted(protection.acquire('critical'));
    const a = protection.acquire('normal') as Promise<Ticket | undefined>;
    const b = protection.acquire('normal') as Promise<Ticket | undefined>;
    const c = protection.acquire('high') as Promise<Ticket | undefined>;
    expect(await b).toBeUndefined();
    expect(protection.acquire('normal')).toBeUndefined();
    expect(shed).toEqual(['normal', 'normal']);
    expect(protection.pool()!.waiting).toBe(2);
    void a;
    void c;
  });

  it("sheds by the event loop's delay: sheddable above the threshold, normal above twice it, high above four times it; critical never", () => {
    const { protection } = fixed(100, { maxEventLoopDelayMs: 50 });
    const admits = () =>
      (['critical', 'high', 'normal', 'sheddable'] as const).map((p) => {
        const t = protection.acquire(p) as Ticket | undefined;
        t?.drop();
        return t !== undefined;
      });
    protection.update(50);
    expect(admits()).toEqual([true, true, true, true]);
    protection.update(60);
    expect(admits()).toEqual([true, true, true, false]);
    protection.update(120);
    expect(admits()).toEqual([true, true, false, false]);
    protection.update(250);
    expect(admits()).toEqual([true, false, false, false]);
    protection.update(10);
    expect(admits()).toEqual([true, true, true, true]);
  });

  it("sheds by how long the event loop's turn has been busy: sheddable above maxTurnMs, normal above twice it, high above four times it; critical never", () => {
    const { protection, clock, episodes } = fixed(100, { maxTurnMs: 5 });
    const admits = () =>
      (['critical', 'high', 'normal', 'sheddable'] as const).map((p) => {
        const t = protection.acquire(p) as Ticket | undefined;
        t?.drop();
        return t !== undefined;
      });
    // The last two windows saw the loop busy with calls (utilisation above 0.9): the budget
    // applies.
    for (let i = 0; i < 2; i++) {
      (protection.acquire('critical') as Ticket).drop();
      protection.update(0, 0.95);
    }
    // The turn is timed from its first call; each step below is synchronous work in it.
    expect(admits()).toEqual([true, true, true, true]);
    clock.work(5);
    expect(admits()).toEqual([true, true, true, true]);
    clock.work(0.5);
    expect(admits()).toEqual([true, true, true, false]);
    clock.work(5);
    expect(admits()).toEqual([true, true, false, false]);
    clock.work(10);
    expect(admits()).toEqual([true, false, false, false]);
    expect(episodes[0]!.episode.signal).toBe('turn_budget');
    // A new turn starts afresh, however long the last one was.
    clock.advance(0);
    expect(admits()).toEqual([true, true, true, true]);
    // Not timed: a turn of any length sheds nothing.
    const untimed = fixed(100, { maxTurnMs: false });
    expect(untimed.protection.acquire('sheddable')).toBeDefined();
    untimed.clock.work(1000);
    expect(untimed.protection.acquire('sheddable')).toBeDefined();
    // An event loop not watched is not timed either, unless the budget is set.
    expect(overloadSettings({ maxEventLoopDelayMs: false })!.pool.maxTurnMs).toBe(Infinity);
    expect(overloadSettings({ maxEventLoopDelayMs: false, maxTurnMs: 3 })!.pool.maxTurnMs).toBe(3);
    // A bad budget fails with its value.
    expect(() => overloadSettings({ maxTurnMs: 0 })).toThrow(
      'invalid overload.maxTurnMs 0: expected a number of ms > 0, or false',
    );
  });

  it("never sheds an idle loop's burst by the turn's budget or the delay: only after two busy windows in a row (utilisation above 0.9)", () => {
    const { protection, clock, episodes } = fixed(100, { maxTurnMs: 5 });
    /** Whether a normal call is admitted 30 ms into a turn (six times the budget). */
    const lateInTurn = () => {
      clock.advance(0);
      protection.acquire('critical');
      clock.work(30);
      const t = protection.acquire('normal') as Ticket | undefined;
      t?.drop();
      return t !== undefined;
    };
    // Busy windows without a call (the app's own bootstrap) are no load, even late.
    protection.update(250, 1);
    protection.update(250, 1);
    expect(lateInTurn()).toBe(true);
    // Cold: an idle window, then one 90 % busy (not above the threshold).
    protection.update(0, 0.05);
    expect(lateInTurn()).toBe(true);
    protection.update(0, 0.9);
    expect(lateInTurn()).toBe(true);
    expect(episodes).toEqual([]);
    // One busy window (a cold burst) is not enough; two in a row are, until one is not busy.
    protection.update(0, 0.91);
    expect(lateInTurn()).toBe(true);
    protection.update(0, 0.91);
    expect(lateInTurn()).toBe(false);
    protection.update(0, 0.5);
    expect(lateInTurn()).toBe(true);
    // The event loop's delay above its threshold (50 ms) in a busy window is busy; below
    // twice it, normal calls are shed by the turn's budget, not by the delay.
    protection.update(60, 0.95);
    (protection.acquire('critical') as Ticket).drop();
    protection.update(60, 0.95);
    expect(lateInTurn()).toBe(false);
    // A late loop that was not busy for long (a cold process's first burst stalled it) sheds
    // nothing, by the delay (even at four times its threshold) or by the turn's budget.
    protection.update(250, 0.6);
    expect(lateInTurn()).toBe(true);
    protection.update(250, 1);
    expect(lateInTurn()).toBe(true);
    expect(protection.acquire('sheddable')).toBeDefined();
    // Utilisation not measured: not busy.
    protection.update(0);
    expect(lateInTurn()).toBe(true);
    expect(episodes.map((e) => e.episode.signal)).toEqual(['turn_budget']);
  });

  // The overload bench's cost figure on Express (GET /hi at 1500 req/s, 64 connections): a
  // cold or crowded app's loop was busy for a few windows, its turns held 30 to 60 calls, and
  // the turn's budget shed the normal ones past 10 ms: 1,007 of 13,500, and shedding kept the
  // loop busy (85 % of the calls shed for 3.5 s in one run), for a shed call's 503 costs the
  // loop more than the trivial answer it refuses (measured: 0.67 ms against 0.26).
  it("sheds by the turn's budget only while a shed call costs the turn less than half an admitted one", () => {
    const { protection, clock } = fixed(100, { maxTurnMs: 5 });
    /** One turn of `calls` normal calls; an admitted one costs `admittedMs`, a shed one `shedMs`. */
    const turn = (calls: number, admittedMs: number, shedMs: number) => {
      const shed: number[] = [];
      for (let i = 0; i < calls; i++) {
        const t = protection.acquire('normal') as Ticket | undefined;
        if (t === undefined) {
          shed.push(i);
          clock.work(shedMs);
        } else {
          clock.work(admittedMs);
          t.end();
        }
      }
      clock.advance(0);
      // Every window saw the loop busy with calls: the budget applies throughout.
      protection.update(0, 1);
      return shed;
    };
    busyLoop(protection, clock);
    // Past 10 ms (twice the budget) the normal calls are shed, until four shed calls have
    // shown what a shed costs: more than half an admitted call. None after that.
    expect(turn(60, 0.26, 0.67)).toEqual([39, 40, 41, 42]);
    for (let i = 0; i < 20; i++) expect(turn(60, 0.26, 0.67)).toEqual([]);
    // A heavier handler (2 ms) makes a shed worth it again, once the admitted calls' mean
    // has grown past twice a shed's cost (16 calls at α = 1/16): the budget bounds the turn.
    expect(turn(12, 2, 0.67)).toEqual([]);
    expect(turn(12, 2, 0.67)).toEqual([6, 7, 8, 9, 10, 11]);
    // Where a shed call is cheap (a 2 ms handler's 0.1 ms 503), it sheds from the start.
    const cheap = fixed(100, { maxTurnMs: 5 });
    (cheap.protection.acquire('critical') as Ticket).drop();
    cheap.protection.update(0, 1);
    (cheap.protection.acquire('critical') as Ticket).drop();
    cheap.protection.update(0, 1);
    const shedAt: number[] = [];
    for (let i = 0; i < 12; i++) {
      const t = cheap.protection.acquire('normal') as Ticket | undefined;
      if (t === undefined) {
        shedAt.push(i);
        cheap.clock.work(0.1);
      } else {
        cheap.clock.work(2);
        t.end();
      }
    }
    expect(shedAt).toEqual([6, 7, 8, 9, 10, 11]);
  });

  // A review's input: the least shed gap was kept for the process's lifetime, so one gap
  // shorter than any 503 (0.01 ms here, among 503s of 0.67 ms beside trivial answers of 0.26)
  // held the cost rule off for good, and the budget went on shedding calls whose 503 costs
  // more than their answer (the self-feeding shedding of the test above).
  it('forgets a shed gap shorter than any 503 after as many shed calls as it weighs', () => {
    const { protection, clock } = fixed(100, { maxTurnMs: 5 });
    busyLoop(protection, clock);
    let sheds = 0;
    /** One turn of 60 normal calls: 0.26 ms admitted; the first shed 0.01 ms, then 0.67. */
    const turn = () => {
      const shed: number[] = [];
      for (let i = 0; i < 60; i++) {
        const t = protection.acquire('normal') as Ticket | undefined;
        if (t === undefined) {
          shed.push(i);
          clock.work(sheds++ === 0 ? 0.01 : 0.67);
        } else {
          clock.work(0.26);
          t.end();
        }
      }
      clock.advance(0);
      protection.update(0, 1);
      return shed.length;
    };
    const perTurn = Array.from({ length: 10 }, turn);
    // Shed past 10 ms while the short gap is among the latest 16 (it and 16 after it), then
    // never again (with a lifetime least: 21 in every turn).
    expect(perTurn).toEqual([17, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  });

  // A review's input for the ring above: 503s dear for two turns (2 ms beside 3 ms answers)
  // filled it, the rule stopped shedding, so no shed call came to tell it the 503s were cheap
  // again (0.3 ms), and turns of 90 ms went on against a budget of 5 for good.
  it('learns again what a shed costs once the gaps it stopped shedding on are 5 s old', () => {
    const { protection, clock } = fixed(100, { maxTurnMs: 5 });
    busyLoop(protection, clock);
    /** One turn of 30 normal calls, 3 ms each admitted, `shedMs` shed; how many were shed. */
    const turn = (shedMs: number) => {
      let shed = 0;
      for (let i = 0; i < 30; i++) {
        const t = protection.acquire('normal') as Ticket | undefined;
        if (t === undefined) {
          shed++;
          clock.work(shedMs);
        } else {
          clock.work(3);
          t.end();
        }
      }
      clock.advance(0);
      protection.update(0, 1);
      return shed;
    };
    expect([turn(0.3), turn(0.3)]).toEqual([26, 26]);
    expect([turn(2), turn(2)]).toEqual([16, 0]);
    const cheapAgainAt = clock.now();
    const cheap: number[] = [];
    let resumedAfterMs = 0;
    while (cheap.length < 100) {
      const at = clock.now();
      cheap.push(turn(0.3));
      if (cheap.at(-1)! > 0) {
        resumedAfterMs = at - cheapAgainAt;
        break;
      }
    }
    // It sheds again in the first turn once the dear gaps are 5 s old; then as in A.
    expect({ turns: cheap.length, resumedAfterMs }).toEqual({ turns: 55, resumedAfterMs: 4860 });
    expect([turn(0.3), turn(0.3), turn(0.3)]).toEqual([26, 26, 26]);
  });

  // The review's input: a cheap route's calls of one priority (high, 0.05 ms) and a dear
  // route's of another (normal, 10 ms, one call in ten), a 503 at 0.3 ms. With one mean over
  // every admitted call, the cheap calls made shedding look useless, the dear normal calls
  // stopped being shed, turns grew past 20 ms, and the high calls were shed in their place.
  it('weighs a shed call against admitted calls of the priority it would shed', () => {
    const { protection, clock } = fixed(100, { maxTurnMs: 5 });
    busyLoop(protection, clock);
    const shed = { high: 0, normal: 0 };
    const turns: number[] = [];
    for (let n = 0; n < 60; n++) {
      const start = clock.now();
      for (let i = 0; i < 60; i++) {
        const priority = i % 10 === 9 ? 'normal' : 'high';
        const t = protection.acquire(priority) as Ticket | undefined;
        if (t === undefined) {
          if (n >= 10) shed[priority]++;
          clock.work(0.3);
        } else {
          clock.work(priority === 'normal' ? 10 : 0.05);
          t.end();
        }
      }
      if (n >= 10) turns.push(clock.now() - start);
      clock.advance(0);
      protection.update(0, 1);
    }
    // The dear normal calls past twice the budget (all but the first of each turn) are shed;
    // the cheap high ones never are, and no turn reaches 20 ms.
    expect(shed).toEqual({ high: 0, normal: 250 });
    expect(Math.max(...turns)).toBeLessThan(20);
  });

  it('says which signal shed the first call of an episode: the limit, the event loop delay', () => {
    const atLimit = fixed(1);
    admitted(atLimit.protection.acquire('normal'));
    expect(atLimit.protection.acquire('normal')).toBeUndefined();
    expect(atLimit.episodes[0]!.episode.signal).toBe('limit');
    const late = fixed(100);
    late.protection.update(51);
    expect(late.protection.acquire('sheddable')).toBeUndefined();
    expect(late.episodes[0]!.episode.signal).toBe('event_loop_delay');
  });

  it('lets go of a call still counted after leaseMs', () => {
    const { protection, clock } = fixed(1, { leaseMs: 1000 });
    admitted(protection.acquire('normal'));
    expect(protection.acquire('normal')).toBeUndefined();
    clock.advance(999);
    protection.update();
    expect(protection.pool()!.inFlightTotal).toBe(1);
    clock.advance(1);
    protection.update();
    expect(protection.pool()!.inFlightTotal).toBe(0);
    admitted(protection.acquire('normal'));
  });

  it('reports one start and one stop per shedding episode, the stop after 2 s without a shed call', () => {
    const { protection, clock, episodes } = fixed(1);
    const t = admitted(protection.acquire('normal'));
    // The clock reads fractions of a ms (performance.now): the episode's duration is given in
    // whole ms (a tryout's line read "durationMs":689.567579999999).
    for (let i = 0; i < 5; i++) {
      expect(protection.acquire('sheddable')).toBeUndefined();
      clock.advance(100.123);
      protection.update();
    }
    expect(protection.acquire('normal')).toBeUndefined();
    t.end();
    clock.advance(1999);
    protection.update();
    expect(episodes.map((e) => e.started)).toEqual([true]);
    clock.advance(1);
    protection.update();
    clock.advance(5000);
    protection.update();
    expect(episodes).toEqual([
      {
        started: true,
        episode: {
          limit: 1,
          inFlight: 1,
          pools: ['process'],
          shed: { critical: 0, high: 0, normal: 0, sheddable: 1 },
          signal: 'limit',
        },
      },
      {
        started: false,
        episode: {
          limit: 1,
          inFlight: 0,
          pools: ['process'],
          shed: { critical: 0, high: 0, normal: 1, sheddable: 5 },
          durationMs: 501,
        },
      },
    ]);
  });

  it('counts a named pool apart from the process pool', () => {
    const clock = new SteppedClock();
    const protection = new OverloadProtection(
      overloadSettings({
        minLimit: 1,
        initialLimit: 1,
        pools: { db: { minLimit: 2, maxLimit: 2 } },
      })!,
      {},
      clock,
    );
    admitted(protection.acquire('normal'));
    expect(protection.acquire('normal')).toBeUndefined();
    admitted(protection.acquire('normal', 'db'));
    admitted(protection.acquire('normal', 'db'));
    expect(protection.acquire('normal', 'db')).toBeUndefined();
  });
});
