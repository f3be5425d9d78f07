/**
 * A fixed offered load, spread evenly over time: requests are sent on a schedule (rate x
 * elapsed time), over keep-alive connections used in turn, whatever the app's speed.
 *
 * Not autocannon's `overallRate`: that one sends each connection's quota for the second as
 * fast as it can, then waits for the next second, so the app still runs saturated while a
 * burst lasts (measured: 20,000 req/s against an app that serves 40,000 kept it busy for
 * about 600 ms of each second and idle for the rest) and a slower variant is still charged
 * for its own slowness, the effect the fixed load is there to remove.
 */
import { connect, type Socket } from 'node:net';

export interface PacedSample {
  /** Responses per second over the run (the target rate when the app kept up). */
  rps: number;
  /** Responses received, late ones included: what the app's CPU was spent on. */
  requests: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses other than 2xx plus requests that got no response. */
  non2xx: number;
  /**
   * 2xx responses without an `X-RateLimit-Remaining` header: answered without a decision
   * (every limiter here sends it when it decides; one that failed open, its store timed out
   * or its circuit breaker open, does not). Counts for the variants with a limiter only.
   */
  undecided: number;
}

/** The header every limiter of this benchmark sends when it decided. */
export const DECIDED_HEADER = 'x-ratelimit-remaining';
const DECIDED = new RegExp(`\\r\\n${DECIDED_HEADER}:`, 'i');

/** How often the schedule is checked, in ms: requests due meanwhile leave together. */
const TICK_MS = 1;
/** How long the requests still under way at the end may take, in ms. */
const DRAIN_MS = 5000;

interface Connection {
  socket: Socket;
  /** Bytes of a response not yet complete. */
  pending: Buffer;
  /** When its request was sent (performance.now()), or undefined when idle. */
  sentAt: number | undefined;
}

/**
 * Sends `GET url` at `rate` requests per second for `durationS` seconds over `connections`
 * connections, one request under way on each at most; a request due while all are busy
 * waits for the first to free up (the app is then behind, and `rps` below `rate` says so).
 * Reads only what this benchmark's apps answer: HTTP/1.1 with a Content-Length.
 */
export async function pacedLoad(
  url: string,
  rate: number,
  durationS: number,
  connections: number,
): Promise<PacedSample> {
  const { hostname, port, pathname } = new URL(url);
  const request = Buffer.from(`GET ${pathname} HTTP/1.1\r\nHost: ${hostname}:${port}\r\n\r\n`);
  const latencies: number[] = [];
  let failed = 0;
  let non2xx = 0;
  let undecided = 0;
  let sent = 0;
  let inWindow = 0;
  const idle: Connection[] = [];
  const all = new Set<Connection>();
  const start = performance.now();
  const end = start + durationS * 1000;
  let finished: () => void = () => {};
  const drained = new Promise<void>((resolve) => (finished = resolve));
  const due = (now: number) => Math.floor((Math.min(now, end) - start) * (rate / 1000));

  const send = (now: number) => {
    // First in, first out: every connection stays in use, none idles into a keep-alive timeout.
    while (sent < due(now) && idle.length) {
      const c = idle.shift()!;
      c.sentAt = performance.now();
      c.socket.write(request);
      sent++;
    }
  };
  const done = (c: Connection, ok: boolean) => {
    const now = performance.now();
    if (c.sentAt === undefined) return;
    if (ok) {
      latencies.push(now - c.sentAt);
      if (now <= end) inWindow++;
    } else failed++;
    c.sentAt = undefined;
    idle.push(c);
    if (now < end) send(now);
    else if (idle.length === all.size) finished();
  };
  const open = async (): Promise<Connection> => {
    const socket = connect(Number(port), hostname);
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve).once('error', reject);
    });
    const c: Connection = { socket, pending: Buffer.alloc(0), sentAt: undefined };
    socket.on('data', (chunk: Buffer) => {
      c.pending = c.pending.length ? Buffer.concat([c.pending, chunk]) : chunk;
      const response = parseResponse(c.pending);
      if (response === undefined) return;
      c.pending = Buffer.alloc(0);
      if (response.status < 200 || response.status > 299) non2xx++;
      else if (!response.decided) undecided++;
      done(c, true);
    });
    // A closed connection loses its request, if any, and is not replaced: the rest carry on.
    socket
      .on('error', () => {})
      .on('close', () => {
        all.delete(c);
        const i = idle.indexOf(c);
        if (i >= 0) idle.splice(i, 1);
        else if (c.sentAt !== undefined) failed++;
        if (!all.size || (performance.now() >= end && idle.length === all.size)) finished();
      });
    all.add(c);
    idle.push(c);
    return c;
  };

  await Promise.all(Array.from({ length: connections }, open));
  const timer = setInterval(() => {
    const now = performance.now();
    if (now < end) return send(now);
    clearInterval(timer);
    if (idle.length === all.size) finished();
  }, TICK_MS);
  const drainTimer = setTimeout(finished, durationS * 1000 + DRAIN_MS);
  await drained;
  clearInterval(timer);
  clearTimeout(drainTimer);
  const lost = [...all].filter((c) => c.sentAt !== undefined).length;
  for (const c of all) c.socket.destroy();
  const sorted = Float64Array.from(latencies).sort();
  const at = (q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? NaN;
  return {
    rps: inWindow / durationS,
    requests: latencies.length,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    non2xx: non2xx + failed + lost,
    undecided,
  };
}

/**
 * The status of the complete response at the start of `buf`, and whether it carries
 * {@link DECIDED_HEADER}, or undefined while it is incomplete. One request is under way per
 * connection, so a complete response is all of it.
 */
export function parseResponse(buf: Buffer): { status: number; decided: boolean } | undefined {
  const headEnd = buf.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  const head = buf.toString('latin1', 0, headEnd);
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (!length) throw new Error(`a response without Content-Length:\n${head}`);
  if (buf.length < headEnd + 4 + Number(length[1])) return undefined;
  return { status: Number(head.slice(9, 12)), decided: DECIDED.test(head) };
}
