/**
 * A discrete-event simulation of a Node server under overload protection, for
 * test/unit/overload-simulation.test.ts: simulated time only (no timer, no sleep), the real
 * `OverloadProtection` deciding every call on the simulation's clock.
 *
 * The server is one event loop. Requests arrive open-loop, evenly spaced at the phase's rate
 * (one in five `critical`, the rest `sheddable`), into the sockets' queue. The loop turns as
 * libuv does: the timers due first (the event-loop delay histogram every 10 ms, the
 * protection's window every `windowMs`, the admission queue's timers), then every callback
 * ready when the turn began, one after the other; what arrives meanwhile waits for the next
 * turn; then the `setImmediate` callbacks (the check phase). Each callback costs loop time:
 *
 * - `cpu`: an admitted call is 2 ms of CPU (its handler, synchronous), a shed call
 *   `SHED_COST_MS` (read, route, answer 503). Capacity: 500 calls/s.
 * - `pool`: every call costs `SHED_COST_MS` of loop time, an admitted one then holds one of 4
 *   connections for 5 ms (waiters in FIFO order, unbounded) and its reply costs
 *   `REPLY_COST_MS` more. Capacity: 800 calls/s (the loop is 12 % busy at that rate).
 *
 * The event loop's delay handed to `update` is computed as `EventLoopDelay.read` does it:
 * the mean gap between the 10 ms histogram timer's runs beyond 10 ms, or how late the window's
 * own timer ran, whichever is larger; its utilisation as `performance.eventLoopUtilization`
 * does: the loop time spent in callbacks over the window's length.
 */
import type { Ticket } from '../../lib/core/overload/admission.js';
import type { OverloadClock } from '../../lib/core/overload/clock.js';
import { overloadSettings } from '../../lib/core/overload/options.js';
import { OverloadProtection } from '../../lib/core/overload/protection.js';
import type { OverloadOptions, Priority } from '../../lib/index.js';

export type Work = 'cpu' | 'pool';

/** Loop time of a call that is shed, and of a pool call's request, in ms. */
const SHED_COST_MS = 0.1;
/** Loop time of a pool call's reply, in ms. */
const REPLY_COST_MS = 0.05;
/** A call answered later than this after it arrived is one its client gave up on, ms. */
const CLIENT_TIMEOUT_MS = 1000;
const CPU_MS = 2;
const POOL_SIZE = 4;
const POOL_MS = 5;
const HISTOGRAM_MS = 10;
/** How long after the load begins its steady state is taken to start, ms (as the bench). */
const ONSET_MS = 1000;

/** Calls per second each work serves at most. */
const CAPACITY: Record<Work, number> = {
  cpu: 1000 / CPU_MS,
  pool: (POOL_SIZE * 1000) / POOL_MS,
};

/** One phase of the load: `rate` calls per second for `durationMs`. */
interface Phase {
  rate: number;
  durationMs: number;
}

/** One call's fate. */
interface CallRecord {
  priority: Priority;
  /** When it arrived, ms. */
  at: number;
  /** Its answer's latency from arrival, ms. */
  latencyMs: number;
  ok: boolean;
}

/** The protection's state at the end of each window. */
interface WindowRecord {
  at: number;
  limit: number;
  delayMs: number;
  inFlight: number;
  /** Calls admitted and shed in the window, by priority. */
  admitted: { critical: number; sheddable: number };
  shed: { critical: number; sheddable: number };
}

export interface SimResult {
  calls: CallRecord[];
  windows: WindowRecord[];
  /** Log of shedding episodes: [ms, started]. */
  episodes: [number, boolean][];
}

interface Timer {
  at: number;
  run: () => void;
  cleared: boolean;
}

interface Event {
  at: number;
  seq: number;
  run: () => void;
}

/** A binary heap of events by time, then by the order they were scheduled in. */
class Agenda {
  private heap: Event[] = [];
  private seq = 0;
  push(at: number, run: () => void): Event {
    const e = { at, seq: this.seq++, run };
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (before(h[p]!, e)) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = e;
    return e;
  }
  peek(): Event | undefined {
    return this.heap[0];
  }
  pop(): Event | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last !== undefined) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        let best = last;
        if (l < h.length && before(h[l]!, best)) {
          m = l;
          best = h[l]!;
        }
        if (r < h.length && before(h[r]!, best)) m = r;
        if (m === i) break;
        h[i] = h[m]!;
        i = m;
      }
      h[i] = last;
    }
    return top;
  }
}

const before = (a: Event, b: Event) => a.at < b.at || (a.at === b.at && a.seq < b.seq);

/** Runs `phases` one after the other against a fresh server doing `work`. */
function simulate(work: Work, phases: Phase[], options: OverloadOptions = {}): SimResult {
  const agenda = new Agenda();
  let now = 0;
  /** Loop timers due and not run yet, and the sockets' callbacks ready. */
  const dueTimers: Timer[] = [];
  const ready: (() => number)[] = [];
  /** `setImmediate` callbacks: run once the turn's callbacks are over (its check phase). */
  const immediates: (() => void)[] = [];

  /** A loop timer: it runs in the first turn after `at`, unless cleared. */
  const loopTimer = (at: number, run: () => void) => {
    const timer = { at, run, cleared: false };
    agenda.push(at, () => dueTimers.push(timer));
    return timer;
  };
  const clock: OverloadClock = {
    now: () => now,
    setTimeout: (run, ms) => loopTimer(now + ms, run),
    clearTimeout: (handle) => {
      (handle as Timer).cleared = true;
    },
    setImmediate: (run) => {
      immediates.push(run);
    },
  };

  const result: SimResult = { calls: [], windows: [], episodes: [] };
  const settings = overloadSettings(options)!;
  const protection = new OverloadProtection(
    settings,
    {
      sheddingStarted: () => result.episodes.push([now, true]),
      sheddingStopped: () => result.episodes.push([now, false]),
    },
    clock,
  );
  const pool = protection.pool()!;
  const counts = () => ({
    admitted: { critical: 0, sheddable: 0 },
    shed: { critical: 0, sheddable: 0 },
  });
  let window = counts();

  // The event loop's delay, as EventLoopDelay measures it.
  let gaps = 0;
  let gapCount = 0;
  let lastRun = 0;
  const histogram = (at: number) =>
    loopTimer(at, () => {
      gaps += now - lastRun;
      gapCount++;
      lastRun = now;
      histogram(now + HISTOGRAM_MS);
    });
  histogram(HISTOGRAM_MS);
  const windowMs = settings.pool.windowMs;
  let lastWindow = 0;
  /** Loop time spent in callbacks since the last window ended, ms. */
  let busyMs = 0;
  const tick = (at: number) =>
    loopTimer(at, () => {
      const late = Math.max(0, now - lastWindow - windowMs);
      // As performance.eventLoopUtilization: the window's share spent in callbacks.
      const utilization = now > lastWindow ? Math.min(1, busyMs / (now - lastWindow)) : 0;
      busyMs = 0;
      lastWindow = now;
      const mean = gapCount > 0 ? Math.max(0, gaps / gapCount - HISTOGRAM_MS) : 0;
      gaps = gapCount = 0;
      const delayMs = settings.watchesEventLoop ? Math.max(mean, late) : undefined;
      protection.update(delayMs, utilization);
      result.windows.push({
        at: now,
        limit: pool.limiter.limit,
        delayMs: delayMs ?? 0,
        inFlight: pool.inFlightTotal,
        ...window,
      });
      window = counts();
      tick(now + windowMs);
    });
  tick(windowMs);

  // The database's connections.
  let free = POOL_SIZE;
  const waiting: (() => void)[] = [];
  const connection = (use: () => void) => {
    if (free > 0) {
      free--;
      use();
    } else waiting.push(use);
  };
  const giveBack = () => {
    const next = waiting.shift();
    if (next) next();
    else free++;
  };

  const answer = (call: CallRecord, ok: boolean) => {
    call.latencyMs = now - call.at;
    call.ok = ok && call.latencyMs <= CLIENT_TIMEOUT_MS;
  };

  /** The handler of an admitted call; the loop time it takes now. */
  const handle = (call: CallRecord, ticket: Ticket): number => {
    ticket.restart();
    window.admitted[call.priority as 'critical' | 'sheddable']++;
    if (work === 'cpu') {
      now += CPU_MS;
      ticket.end();
      answer(call, true);
      return CPU_MS;
    }
    connection(() => {
      agenda.push(now + POOL_MS, () =>
        ready.push(() => {
          giveBack();
          now += REPLY_COST_MS;
          ticket.end();
          answer(call, true);
          return REPLY_COST_MS;
        }),
      );
    });
    return 0;
  };

  const arrive = (call: CallRecord) =>
    ready.push(() => {
      const start = now;
      if (work === 'pool') now += SHED_COST_MS;
      const admitted = protection.acquire(call.priority);
      if (admitted === undefined) {
        if (work === 'cpu') now += SHED_COST_MS;
        window.shed[call.priority as 'critical' | 'sheddable']++;
        answer(call, false);
        return now - start;
      }
      if (admitted instanceof Promise) {
        // The simulation runs synchronously: a queue (queueMs) is tested elsewhere.
        throw new Error('the simulation does not model the admission queue');
      }
      handle(call, admitted);
      return now - start;
    });

  // The load: evenly spaced, one call in five critical.
  let t = 0;
  let n = 0;
  for (const { rate, durationMs } of phases) {
    const gap = 1000 / rate;
    const end = t + durationMs;
    for (let at = t; at < end; at += gap) {
      const call: CallRecord = {
        priority: n++ % 5 === 0 ? 'critical' : 'sheddable',
        at,
        latencyMs: NaN,
        ok: false,
      };
      result.calls.push(call);
      agenda.push(at, () => arrive(call));
    }
    t = end;
  }
  const endAt = t;

  /** Moves the background (arrivals, replies, timers falling due) up to `until`. */
  const background = (until: number) => {
    for (let e = agenda.peek(); e !== undefined && e.at <= until; e = agenda.peek()) {
      agenda.pop();
      e.run();
    }
  };

  // The loop, one turn at a time.
  let turn = 0;
  while (turn < endAt + 5000) {
    now = turn;
    background(now);
    if (dueTimers.length === 0 && ready.length === 0) {
      const next = agenda.peek();
      if (next === undefined) break;
      turn = next.at;
      continue;
    }
    // In the order they fell due (the agenda's); a timer cleared since is skipped.
    for (const timer of dueTimers.splice(0)) if (!timer.cleared) timer.run();
    const batch = ready.splice(0);
    for (const callback of batch) {
      background(now);
      busyMs += callback();
    }
    background(now);
    for (const run of immediates.splice(0)) run();
    turn = now;
  }
  return result;
}

/** The `q` quantile (0 to 1) of `values`, nearest rank; NaN when empty. */
function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
}

/** What a run at one load shows: its unloaded, loaded and recovery phases. */
export interface LoadFigures {
  /** The load, as a multiple of the capacity. */
  load: number;
  /** Successful calls per second in the loaded phase, over the capacity. */
  goodputShare: number;
  /** Share of the loaded phase's critical calls answered. */
  criticalOk: number;
  /** p99 latency of the critical calls answered, ms: unloaded, loaded. */
  unloadedCriticalP99Ms: number;
  criticalP99Ms: number;
  /**
   * p99 latency of the critical calls answered among those that arrived {@link ONSET_MS} or
   * more after the load began, ms: the steady state, without the onset's queue.
   */
  criticalSteadyP99Ms: number;
  /** Share of the loaded phase's sheddable calls answered. */
  sheddableOk: number;
  /** The limit at the end of the unloaded phase. */
  unloadedLimit: number;
  /** The lowest limit in the loaded phase. */
  loadedLimit: number;
  /**
   * ms after the load dropped until the limit was back to the unloaded limit and no call
   * was shed any more, for good; Infinity when not within the recovery phase.
   */
  recoveryMs: number;
  /** Over the last half of the loaded phase: the limit's and the admitted sheddable calls' range per window. */
  steady: { limit: [number, number]; admittedSheddable: [number, number] };
}

/**
 * Runs `work` at half its capacity for `phaseMs`, then at `load` × its capacity, then at
 * half again (the recovery), and figures what each phase shows.
 */
export function runLoad(
  work: Work,
  load: number,
  options: OverloadOptions = {},
  phaseMs = 10_000,
): LoadFigures & { result: SimResult } {
  const capacity = CAPACITY[work];
  const result = simulate(
    work,
    [
      { rate: capacity / 2, durationMs: phaseMs },
      { rate: capacity * load, durationMs: phaseMs },
      { rate: capacity / 2, durationMs: phaseMs },
    ],
    options,
  );
  const within = (from: number, to: number) =>
    result.calls.filter((c) => c.at >= from && c.at < to);
  const unloaded = within(0, phaseMs);
  const loaded = within(phaseMs, 2 * phaseMs);
  const okLatencies = (calls: CallRecord[], p: Priority) =>
    calls.filter((c) => c.priority === p && c.ok).map((c) => c.latencyMs);
  const share = (calls: CallRecord[], p: Priority) => {
    const mine = calls.filter((c) => c.priority === p);
    return mine.filter((c) => c.ok).length / mine.length;
  };
  const windowsIn = (from: number, to: number) =>
    result.windows.filter((w) => w.at >= from && w.at < to);
  const unloadedLimit = windowsIn(0, phaseMs).at(-1)!.limit;
  const loadedWindows = windowsIn(phaseMs, 2 * phaseMs);
  const steadyWindows = windowsIn(1.5 * phaseMs, 2 * phaseMs);
  const range = (values: number[]): [number, number] => [Math.min(...values), Math.max(...values)];
  // Recovery: the first window after which every window has the unloaded limit and sheds nothing.
  const after = windowsIn(2 * phaseMs, 3 * phaseMs);
  let lastBad = -1;
  after.forEach((w, i) => {
    if (w.limit < unloadedLimit || w.shed.critical + w.shed.sheddable > 0) lastBad = i;
  });
  const recoveryMs =
    lastBad === after.length - 1
      ? Infinity
      : lastBad < 0
        ? 0
        : after[lastBad + 1]!.at - 2 * phaseMs;
  return {
    load,
    goodputShare: loaded.filter((c) => c.ok).length / (phaseMs / 1000) / capacity,
    criticalOk: share(loaded, 'critical'),
    unloadedCriticalP99Ms: quantile(okLatencies(unloaded, 'critical'), 0.99),
    criticalP99Ms: quantile(okLatencies(loaded, 'critical'), 0.99),
    criticalSteadyP99Ms: quantile(
      okLatencies(within(phaseMs + ONSET_MS, 2 * phaseMs), 'critical'),
      0.99,
    ),
    sheddableOk: share(loaded, 'sheddable'),
    unloadedLimit,
    loadedLimit: Math.min(...loadedWindows.map((w) => w.limit)),
    recoveryMs,
    steady: {
      limit: range(steadyWindows.map((w) => w.limit)),
      admittedSheddable: range(steadyWindows.map((w) => w.admitted.sheddable)),
    },
    result,
  };
}
