/**
 * The open-loop load of the overload part, in an OS process of its own so that it never shares
 * the app's event loop (bench/overload/index.ts runs it):
 *
 *   node load.js '{"origin":"http://127.0.0.1:3000","phases":[{"rateRps":800,"durationS":5}],...}'
 *
 * Requests leave on a schedule (phase after phase, evenly spaced at each phase's rate),
 * whatever the app answers: an overloaded app gets more requests than it serves, as it would
 * from many independent users, and its queue grows. Every `criticalEvery`-th request goes to
 * `/work/critical`, the others to `/work/sheddable`. A connection carries one request at a
 * time; when all are busy another is opened, up to `maxConnections`, beyond which requests wait
 * here. Latency runs from the scheduled send time, so time spent waiting here counts (no
 * coordinated omission). A request not answered `timeoutMs` after its scheduled time is given
 * up (its connection closed, as a client that stops waiting): a timeout. Prints one JSON line,
 * a {@link LoadResult}.
 */
import { connect, type Socket } from 'node:net';
import { parseResponse } from '../http/paced.js';

export interface LoadPhase {
  /** Requests per second sent during the phase. */
  rateRps: number;
  durationS: number;
  /** Whether to return every request of the phase (for the recovery after an overload). */
  trace?: boolean;
}

export interface LoadOptions {
  /** `http://host:port`. */
  origin: string;
  phases: LoadPhase[];
  /** One request in this many is critical. */
  criticalEvery: number;
  timeoutMs: number;
  maxConnections: number;
}

export const PRIORITIES = ['critical', 'sheddable'] as const;
export type PriorityName = (typeof PRIORITIES)[number];

/** One priority's answers in a phase; latencies (ms) of the 2xx answers only. */
export interface PriorityFigures {
  sent: number;
  ok: number;
  /** 503 answers (load shedding, under-pressure's refusals). */
  unavailable: number;
  /** 429 answers (a concurrency limit's refusals). */
  refused: number;
  /** Other statuses, and connections closed without an answer. */
  other: number;
  timeouts: number;
  /** Null without a 2xx answer. */
  p50Ms: number | null;
  p99Ms: number | null;
}

/** A traced request: ms after the phase began (scheduled), priority index, status (0: none), latency in ms. */
export type TracedRequest = [number, number, number, number];

export interface PhaseResult extends LoadPhase {
  /** 2xx answers per second of the phase, to the requests it sent. */
  goodputRps: number;
  byPriority: Record<PriorityName, PriorityFigures>;
  /** Every request of the phase, when it asked for `trace`, in scheduled order. */
  requests?: TracedRequest[];
}

export interface LoadResult {
  /** Epoch ms at which the first phase began; phase `i` began the sum of the earlier durations later. */
  startedAtMs: number;
  phases: PhaseResult[];
  /** The most connections open at once. */
  connections: number;
}

interface Request {
  phase: number;
  priority: number;
  /** performance.now() at which it was due. */
  dueAt: number;
}

interface Connection {
  socket: Socket;
  /** Bytes of a response not yet complete. */
  pending: Buffer;
  /** The request under way on it, if any. */
  request: Request | undefined;
}

interface Outcome {
  request: Request;
  status: number;
  latencyMs: number;
}

const TICK_MS = 1;

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const url = new URL(opts.origin);
  const port = Number(url.port);
  const host = url.hostname;
  const heads = PRIORITIES.map((p) =>
    Buffer.from(`GET /work/${p} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`),
  );
  const outcomes: Outcome[] = [];
  const waiting: Request[] = [];
  const idle: Connection[] = [];
  const busy = new Set<Connection>();
  let opening = 0;
  let open = 0;
  let mostOpen = 0;

  const startedAtMs = Date.now();
  const start = performance.now();
  const phaseStarts: number[] = [];
  let at = start;
  for (const phase of opts.phases) {
    phaseStarts.push(at);
    at += phase.durationS * 1000;
  }
  const end = at;
  // Request n of phase p is due at phaseStart + n / rate; priorities alternate over all phases.
  const counts = opts.phases.map(() => 0);
  let sequence = 0;
  const dueBy = (now: number): Request[] => {
    const due: Request[] = [];
    opts.phases.forEach((phase, p) => {
      const from = phaseStarts[p]!;
      const elapsed = Math.min(now, from + phase.durationS * 1000) - from;
      const total = Math.max(0, Math.floor((elapsed * phase.rateRps) / 1000));
      for (let n = counts[p]!; n < total; n++) {
        const priority = sequence++ % opts.criticalEvery === 0 ? 0 : 1;
        due.push({ phase: p, priority, dueAt: from + (n * 1000) / phase.rateRps });
      }
      counts[p] = Math.max(counts[p]!, total);
    });
    return due;
  };

  const finish = (c: Connection, status: number) => {
    const request = c.request!;
    const latencyMs = performance.now() - request.dueAt;
    // Late past the timeout (this process ran its check late, on a busy machine): given up.
    if (latencyMs > opts.timeoutMs) outcomes.push({ request, status: -1, latencyMs });
    else outcomes.push({ request, status, latencyMs });
    c.request = undefined;
  };
  const dispatch = () => {
    const now = performance.now();
    while (waiting.length && waiting[0]!.dueAt + opts.timeoutMs <= now) {
      outcomes.push({ request: waiting.shift()!, status: -1, latencyMs: opts.timeoutMs });
    }
    while (waiting.length && idle.length) {
      const c = idle.shift()!;
      c.request = waiting.shift()!;
      busy.add(c);
      c.socket.write(heads[c.request.priority]!);
    }
    // One more connection per request still waiting, as far as the cap allows.
    let more = Math.min(waiting.length - opening, opts.maxConnections - open - opening);
    while (more-- > 0) openConnection();
  };
  const openConnection = () => {
    opening++;
    const socket = connect(port, host);
    socket.setNoDelay(true);
    const c: Connection = { socket, pending: Buffer.alloc(0), request: undefined };
    let connected = false;
    socket.once('connect', () => {
      connected = true;
      opening--;
      open++;
      mostOpen = Math.max(mostOpen, open);
      idle.push(c);
      dispatch();
    });
    socket.on('data', (chunk: Buffer) => {
      c.pending = c.pending.length ? Buffer.concat([c.pending, chunk]) : chunk;
      const response = parseResponse(c.pending);
      if (response === undefined || !c.request) return;
      c.pending = Buffer.alloc(0);
      finish(c, response.status);
      busy.delete(c);
      idle.push(c);
      dispatch();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (connected) open--;
      else opening--;
      busy.delete(c);
      const i = idle.indexOf(c);
      if (i >= 0) idle.splice(i, 1);
      // Closed by the app with a request under way (given up here first: already counted).
      if (c.request) finish(c, 0);
      dispatch();
    });
  };

  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = performance.now();
      waiting.push(...dueBy(now));
      for (const c of busy) {
        if (c.request && c.request.dueAt + opts.timeoutMs <= now) {
          outcomes.push({ request: c.request, status: -1, latencyMs: opts.timeoutMs });
          c.request = undefined;
          busy.delete(c);
          c.socket.destroy();
        }
      }
      dispatch();
      if (now >= end && !waiting.length && !busy.size) {
        clearInterval(timer);
        resolve();
      }
    }, TICK_MS);
  });
  for (const c of idle) c.socket.destroy();

  const phases = opts.phases.map((phase, p): PhaseResult => {
    const mine = outcomes.filter((o) => o.request.phase === p);
    const byPriority = Object.fromEntries(
      PRIORITIES.map((name, i) => [name, figures(mine.filter((o) => o.request.priority === i))]),
    ) as Record<PriorityName, PriorityFigures>;
    const ok = mine.filter((o) => o.status >= 200 && o.status < 300).length;
    return {
      ...phase,
      goodputRps: ok / phase.durationS,
      byPriority,
      ...(phase.trace && {
        requests: mine
          .map((o): TracedRequest => [
            round(o.request.dueAt - phaseStarts[p]!),
            o.request.priority,
            Math.max(0, o.status),
            round(o.latencyMs),
          ])
          .sort((a, b) => a[0] - b[0]),
      }),
    };
  });
  return { startedAtMs, phases, connections: mostOpen };
}

const round = (ms: number) => Math.round(ms * 100) / 100;

function figures(outcomes: Outcome[]): PriorityFigures {
  const ok = outcomes.filter((o) => o.status >= 200 && o.status < 300);
  const sorted = Float64Array.from(ok.map((o) => o.latencyMs)).sort();
  const at = (q: number) => {
    const value = sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];
    return value === undefined ? null : round(value);
  };
  const known = (status: number) =>
    (status >= 200 && status < 300) || status === 503 || status === 429 || status === -1;
  return {
    sent: outcomes.length,
    ok: ok.length,
    unavailable: outcomes.filter((o) => o.status === 503).length,
    refused: outcomes.filter((o) => o.status === 429).length,
    other: outcomes.filter((o) => !known(o.status)).length,
    timeouts: outcomes.filter((o) => o.status === -1).length,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
  };
}

if (process.argv[2]) {
  const result = await runLoad(JSON.parse(process.argv[2]) as LoadOptions);
  console.log(JSON.stringify(result));
}
