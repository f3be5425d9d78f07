/**
 * `npm run soak`: a loopback soak on Redis. Starts scripts/soak-app (one route limited to
 * SOAK_RATE per `x-user`) as a child process, drives it at a steady rate with rotating
 * identities, each sending faster than its quota, samples the app's heap every 10 s, and
 * checks at the end:
 *   - no 5xx, no network error, only 200 and 429, every response with rate-limit headers;
 *   - per identity, admitted <= capacity + floor(elapsed * limit / period) (token bucket);
 *   - heap growth from the warm-up mark (1 min) to the end below SOAK_MAX_GROWTH_MB;
 *   - the run's Redis keys stay bounded (old identities expire).
 * Exits 1 on any failure. Not for CI.
 *
 *   REDIS_URL=redis://127.0.0.1:6379   SOAK_SECONDS=600   SOAK_RPS=300
 *   SOAK_IDENTITIES=100     per generation: 300 req/s over 100 is 3/s each, 1.5x a 20/10s quota
 *   SOAK_ROTATE_SECONDS=60  a new set of identities this often
 *   SOAK_RATE=20/10s   SOAK_CONCURRENCY=64   SOAK_MAX_GROWTH_MB=20
 *   SOAK_TIMEOUT_MS         the app's timeoutMs (default: the library's 100 ms)
 *   SOAK_OWN_REDIS=1        start a private redis-server (on the PATH) on a free port instead
 *                           of REDIS_URL: a shared Redis that others flush or block with slow
 *                           scripts makes the limiter time out (fail-open) or forget
 *   SOAK_FAILOVER=sentinel  instead: a private Sentinel group (redis-server on the PATH), failed
 *   SOAK_FAILOVER_EVERY=120 over every so many seconds, handover and crash in turn (see
 *                           soak-failover.ts). Fail-open answers are allowed only for requests
 *                           in flight during a failover window (no primary answers): one sent
 *                           and answered outside them, a busy machine's timeout included, fails
 *                           the run. Each identity may then
 *                           also keep what it was admitted inside the windows, fail-open or
 *                           stored (split brain: the writes the new primary never saw), plus one
 *                           per failover (a write in flight at a crash), as in the failover
 *                           tests. The 10-minute run with a failover every 2 minutes:
 *     SOAK_FAILOVER=sentinel SOAK_FAILOVER_EVERY=120 SOAK_SECONDS=600 npm run soak
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { parseRate } from 'nest-rate-limit';
import { freePort } from '../demo/app.js';
import { SentinelFailovers } from './soak-failover.js';

const env = process.env;
let REDIS_URL = env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const OWN_REDIS = env.SOAK_OWN_REDIS === '1';
const SECONDS = Number(env.SOAK_SECONDS ?? 600);
const RPS = Number(env.SOAK_RPS ?? 300);
const IDENTITIES = Number(env.SOAK_IDENTITIES ?? 100);
const ROTATE_MS = Number(env.SOAK_ROTATE_SECONDS ?? 60) * 1000;
const RATE = env.SOAK_RATE ?? '20/10s';
const CONCURRENCY = Number(env.SOAK_CONCURRENCY ?? 64);
const MAX_GROWTH_MB = Number(env.SOAK_MAX_GROWTH_MB ?? 20);
const SAMPLE_MS = 10_000;
const WARMUP_MS = Math.min(60_000, (SECONDS * 1000) / 2);
const TIMEOUT_MS = 5000;
const MB = 1024 * 1024;
const FAILOVER = env.SOAK_FAILOVER;
const FAILOVER_EVERY_MS = Number(env.SOAK_FAILOVER_EVERY ?? 120) * 1000;
/**
 * A window ends when the app is seen writing on the new primary (its commandstats polled every
 * 20 ms): its first call there went through, so its circuit breaker is closed, and the calls
 * after it go there too. Requests sent in the moment after that write, before it is seen,
 * still count as in the window, and so do the answers to calls sent to the old primary inside
 * the window: with the new connection answering, such a call waits up to `maxWaitMs` (10 x
 * `timeoutMs`, 1 s by default) before it is given up (in the first 10-minute run, 8 answers
 * came after 250 ms, at two crash failovers). Later ones have no reason to fail open.
 */
const FAILOVER_GRACE_MS = 250 + 10 * (Number(env.SOAK_TIMEOUT_MS) || 100);
if (FAILOVER !== undefined && FAILOVER !== 'sentinel')
  throw new Error(`SOAK_FAILOVER=${FAILOVER}: only 'sentinel' is supported`);

const { limit, periodMs } = parseRate(RATE);
const capacity = limit; // token bucket, burst = limit
const run = randomUUID().slice(0, 8);
const prefix = `soak${run}`;
const failures: string[] = [];
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The app as a child process; resolves once /heap answers. */
async function startApp(extraEnv: Record<string, string> = {}) {
  const port = await freePort();
  const main = fileURLToPath(new URL('./soak-app.js', import.meta.url));
  const child = spawn(process.execPath, ['--expose-gc', main], {
    env: {
      ...env,
      REDIS_URL,
      SOAK_PREFIX: prefix,
      SOAK_RATE: RATE,
      PORT: String(port),
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log: string[] = [];
  for (const stream of [child.stdout, child.stderr])
    stream.setEncoding('utf8').on('data', (c: string) => log.push(...c.trimEnd().split('\n')));
  const kill = () => child.kill('SIGKILL');
  process.on('exit', kill);
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    process.off('exit', kill);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(kill, 5000);
    await exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && child.exitCode === null) {
    const up = await fetch(`${url}/heap`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return { url, log, stop };
    await sleep(100);
  }
  await stop();
  throw new Error(`the soak app did not start:\n${log.join('\n')}`);
}

interface HeapSample {
  t: number;
  heapMB: number;
  rssMB: number;
  clientHeapMB: number;
  loopMaxMs: number;
  sent: number;
  inflight: number;
}

interface Identity {
  first: number;
  last: number;
  sent: number;
  admitted: number;
  /** Admitted without rate-limit headers: the store failed and the route failed open. */
  failOpen: number;
  /** When each admission with headers was sent (`performance.now()` ms), with SOAK_FAILOVER. */
  storedAt: number[];
  /** When each fail-open admission was sent and answered, with SOAK_FAILOVER. */
  failOpenAt: Span[];
}

/** A request's send and answer times (`performance.now()` ms). */
interface Span {
  sent: number;
  answered: number;
}

/** A private redis-server on a free port, without persistence. */
async function startRedis(): Promise<() => void> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const kill = () => child.kill('SIGKILL');
  process.on('exit', kill);
  REDIS_URL = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 50; i++) {
    const probe = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0 });
    probe.on('error', () => {});
    const up = await probe.connect().then(
      () => probe.ping().then(() => true),
      () => false,
    );
    probe.disconnect();
    if (up) return () => child.kill('SIGTERM');
    await sleep(100);
  }
  throw new Error('redis-server did not start');
}

async function main(): Promise<boolean> {
  const failovers = FAILOVER ? await SentinelFailovers.start() : undefined;
  const stopRedis = OWN_REDIS && !failovers ? await startRedis() : undefined;
  const redis = failovers
    ? new Redis({ ...failovers.redisOptions, lazyConnect: true, maxRetriesPerRequest: 1 })
    : new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  // Failovers drop its connection on purpose: ioredis reconnects; nothing to report.
  if (failovers) redis.on('error', () => {});
  await redis.connect().catch((error: unknown) => {
    throw new Error(`no Redis at ${REDIS_URL}: ${String(error)}`);
  });
  if (failovers) REDIS_URL = `Sentinel ${failovers.env.REDIS_SENTINELS}`;
  const app = await startApp(failovers?.env);
  console.log(
    `soak ${run}: ${RATE} per x-user, ${RPS} req/s for ${SECONDS} s, ${IDENTITIES} identities ` +
      `per ${ROTATE_MS / 1000} s generation (each ${((RPS / IDENTITIES) * (periodMs / 1000)).toFixed(0)} ` +
      `req per ${periodMs / 1000} s against a quota of ${limit}), concurrency <= ${CONCURRENCY}, ` +
      `Redis ${REDIS_URL} prefix ${prefix}:`,
  );

  const statuses = new Map<string, number>();
  const identities = new Map<string, Identity>();
  const errors: string[] = [];
  let missingHeaders = 0;
  /** The answers without headers, with SOAK_FAILOVER: fail-open is expected in its windows. */
  const unheadered: Span[] = [];
  let sent = 0;
  let inflight = 0;
  let maxInflight = 0;
  let behind = 0;
  const latencies: number[] = [];
  const samples: HeapSample[] = [];
  const count = (key: string) => statuses.set(key, (statuses.get(key) ?? 0) + 1);

  const send = async (user: string) => {
    const id =
      identities.get(user) ??
      identities
        .set(user, {
          first: performance.now(),
          last: 0,
          sent: 0,
          admitted: 0,
          failOpen: 0,
          storedAt: [],
          failOpenAt: [],
        })
        .get(user)!;
    id.sent++;
    const at = performance.now();
    try {
      const response = await fetch(`${app.url}/limited`, {
        headers: { 'x-user': user },
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      await response.arrayBuffer();
      const span = { sent: at, answered: performance.now() };
      count(String(response.status));
      if (response.status === 200) id.admitted++;
      if (!response.headers.get('ratelimit')) {
        missingHeaders++;
        if (failovers) unheadered.push(span);
        if (response.status === 200) {
          id.failOpen++;
          if (failovers) id.failOpenAt.push(span);
        }
      } else if (failovers && response.status === 200) id.storedAt.push(at);
      if (response.status === 429 && !(Number(response.headers.get('retry-after')) >= 1))
        count('429 without Retry-After');
    } catch (error) {
      count('network error');
      if (errors.length < 5) errors.push(String(error));
    }
    const done = performance.now();
    latencies.push(done - at);
    if (done > id.last) id.last = done;
  };

  const sample = async (t: number) => {
    const heap = await fetch(`${app.url}/heap`, { signal: AbortSignal.timeout(TIMEOUT_MS) })
      .then(
        (r) =>
          r.json() as Promise<{
            heapUsed: number;
            rss: number;
            loopDelayMaxMs: number;
            loopDelayP99Ms: number;
          }>,
      )
      .catch(() => undefined);
    if (!heap) {
      failures.push(`heap probe failed at ${(t / 1000).toFixed(0)} s`);
      return;
    }
    const s: HeapSample = {
      t: t / 1000,
      heapMB: heap.heapUsed / MB,
      rssMB: heap.rss / MB,
      clientHeapMB: process.memoryUsage().heapUsed / MB,
      loopMaxMs: heap.loopDelayMaxMs,
      sent,
      inflight,
    };
    samples.push(s);
    const tally = [...statuses].map(([k, n]) => `${k}: ${n}`).join(', ');
    console.log(
      `  t=${s.t.toFixed(0).padStart(4)} s  app heap ${s.heapMB.toFixed(1)} MB  rss ${s.rssMB.toFixed(1)} MB` +
        `  app loop delay max ${s.loopMaxMs.toFixed(0)} ms  (driver heap ${s.clientHeapMB.toFixed(1)} MB)  sent ${sent}  ${tally}`,
    );
  };

  const start = performance.now();
  await sample(0);
  const end = start + SECONDS * 1000;
  const failing = failovers?.run(FAILOVER_EVERY_MS, start, end).catch((error: unknown) => {
    failures.push(`failover: ${error instanceof Error ? error.message : String(error)}`);
  });
  let nextSample = start + SAMPLE_MS;
  let cursor = 0;
  const pending = new Set<Promise<void>>();
  while (performance.now() < end) {
    const now = performance.now();
    const target = Math.floor(((now - start) / 1000) * RPS);
    const generation = Math.floor((now - start) / ROTATE_MS);
    while (sent < target && inflight < CONCURRENCY) {
      const user = `${run}-g${generation}-u${cursor++ % IDENTITIES}`;
      sent++;
      inflight++;
      if (inflight > maxInflight) maxInflight = inflight;
      const p = send(user).finally(() => {
        inflight--;
        pending.delete(p);
      });
      pending.add(p);
    }
    if (sent < target - RPS) behind++; // more than a second behind schedule
    if (now >= nextSample) {
      nextSample += SAMPLE_MS;
      void sample(now - start);
    }
    await sleep(5);
  }
  await Promise.all(pending);
  await failing;
  const elapsed = (performance.now() - start) / 1000;
  await sample(performance.now() - start);
  await app.stop();

  // Redis: keys of this run left now (identities idle for a period have expired).
  let keysLeft = 0;
  let scan = '0';
  do {
    const [next, found] = await redis.scan(scan, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    scan = next;
    keysLeft += found.length;
    if (found.length) await redis.del(...found);
  } while (scan !== '0');
  await redis.quit();
  stopRedis?.();
  await failovers?.stop();

  // Verdicts.
  const tally = [...statuses].map(([k, n]) => `${k}: ${n}`).join(', ');
  const received = [...statuses.values()].reduce((a, b) => a + b, 0);
  console.log(
    `\nsent ${sent} in ${elapsed.toFixed(1)} s (${(sent / elapsed).toFixed(1)} req/s), ` +
      `received ${received}: ${tally}`,
  );
  latencies.sort((a, b) => a - b);
  const pct = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  console.log(
    `latency p50 ${pct(0.5).toFixed(1)} ms, p99 ${pct(0.99).toFixed(1)} ms, max ${pct(1).toFixed(1)} ms; ` +
      `max in flight ${maxInflight}; loop turns > 1 s behind schedule: ${behind}`,
  );
  for (const [k, n] of statuses) if (k !== '200' && k !== '429') failures.push(`${n} × ${k}`);
  if (errors.length) console.log(`first errors:\n  ${errors.join('\n  ')}`);
  const windows = failovers?.windows ?? [];
  const inWindow = (at: number, grace = 0) =>
    windows.some((w) => at >= w.from && at <= w.to + grace);
  // A request in flight when a window began counts in it: sent just before a primary was
  // killed, it fails with it (in the first runs, all the fail-opens "outside" were such).
  // Not earlier than the grace before it: a call the app sent to the store before that had
  // given up (maxWaitMs) before the primary went, so its fail-open is not the failover's.
  const inFlightInWindow = ({ sent, answered }: Span) =>
    windows.some(
      (w) =>
        answered >= w.from &&
        sent >= w.from - FAILOVER_GRACE_MS &&
        sent <= w.to + FAILOVER_GRACE_MS,
    );
  if (failovers) {
    const outsideAt = unheadered.filter((span) => !inFlightInWindow(span)).map((s) => s.sent);
    const outside = outsideAt.length;
    // Where they fell, by 10 s of the run: a loaded machine's timeouts, or a slow recovery.
    const buckets = new Map<number, number>();
    for (const at of outsideAt) {
      const t = Math.floor((at - start) / 10_000) * 10;
      buckets.set(t, (buckets.get(t) ?? 0) + 1);
    }
    // Where each was sent, against the windows: a slow recovery, or something else.
    const sinceWindow = outsideAt.map((at) => {
      const last = windows.filter((w) => w.to <= at).at(-1);
      const next = windows.find((w) => w.from > at);
      const after = last
        ? `${(at - last.to).toFixed(0)} ms after ${windows.indexOf(last) + 1}`
        : '';
      const before = next
        ? `${(next.from - at).toFixed(0)} ms before ${windows.indexOf(next) + 1}`
        : '';
      return [after, before].filter(Boolean).join(', ');
    });
    if (outside) console.log(`outside the windows, sent: ${sinceWindow.join('; ')}`);
    console.log(
      `failovers: ${windows.length}; answers without headers (fail-open) ${missingHeaders}, ` +
        `of which ${outside} outside the failover windows (+${FAILOVER_GRACE_MS} ms)` +
        (outside ? `: ${[...buckets].map(([t, n]) => `${n} at t=${t}s`).join(', ')}` : ''),
    );
    if (windows.length === 0) failures.push('no failover happened');
    const failOpenOutside = [...identities.values()].reduce(
      (n, id) => n + id.failOpenAt.filter((span) => !inFlightInWindow(span)).length,
      0,
    );
    if (failOpenOutside)
      failures.push(`${failOpenOutside} fail-open admissions outside the failover windows`);
    if (outside > failOpenOutside)
      failures.push(
        `${outside - failOpenOutside} other responses without RateLimit header outside failovers`,
      );
  } else if (missingHeaders) {
    failures.push(`${missingHeaders} responses without RateLimit header (fail-open?)`);
  }
  if (received !== sent) failures.push(`sent ${sent} but received ${received}`);
  if (!statuses.get('429'))
    failures.push('no 429 at all: the identities never exceeded their quota');

  let worst = { user: '', admitted: 0, bound: 0, slack: Infinity };
  let over = 0;
  let admittedTotal = 0;
  let failOpenTotal = 0;
  let overByLimiter = 0;
  // With failovers, what the failover tests bound: the excess over the quota, per identity.
  let overQuota = 0;
  let excess = 0;
  /** Of the excess, what the store decided (fail-open admissions left out): lost writes. */
  let storedExcess = 0;
  let worstExcess = { user: '', excess: 0, slack: 0 };
  for (const [user, id] of identities) {
    const quota = capacity + Math.floor(((id.last - id.first) * limit) / periodMs);
    // Fail-open admissions outside the windows are failures of their own (above), not slack.
    const slack = failovers
      ? id.failOpenAt.filter(inFlightInWindow).length +
        id.storedAt.filter((at) => inWindow(at)).length +
        windows.filter((w) => w.to >= id.first && w.from <= id.last).length
      : 0;
    const bound = quota + slack;
    if (failovers && id.admitted > quota) {
      overQuota++;
      excess += id.admitted - quota;
      storedExcess += Math.max(0, id.admitted - id.failOpen - quota);
      if (id.admitted - quota > worstExcess.excess)
        worstExcess = { user, excess: id.admitted - quota, slack };
    }
    admittedTotal += id.admitted;
    failOpenTotal += id.failOpen;
    // Admissions the limiter decided (with headers) must hold the bound even when fail-open ones do not.
    if (id.admitted - id.failOpen > bound) overByLimiter++;
    const left = bound - id.admitted;
    if (left < worst.slack) worst = { user, admitted: id.admitted, bound, slack: left };
    if (id.admitted > bound) {
      over++;
      if (over <= 5)
        failures.push(`${user} admitted ${id.admitted} > bound ${bound} (sent ${id.sent})`);
    }
  }
  if (over > 5) failures.push(`... ${over} identities over their bound in all`);
  console.log(
    `identities: ${identities.size}; admitted ${admittedTotal} of ${sent}; closest to its bound: ` +
      `${worst.user} admitted ${worst.admitted} of at most ${worst.bound}`,
  );
  console.log(
    `admitted fail-open (store timeout or breaker open, no headers): ${failOpenTotal}; ` +
      `identities over the bound counting only the limiter's own admissions: ${overByLimiter}`,
  );
  if (failovers)
    console.log(
      `over-admission with failovers: ${overQuota} identities admitted beyond their quota, ` +
        `${excess} admissions in all, ${storedExcess} of them not fail-open; the largest, ${worstExcess.user || 'none'}: ` +
        `${worstExcess.excess} over its quota, allowed ${worstExcess.slack} (fail-open + admitted ` +
        `inside failover windows + 1 per failover)`,
    );
  console.log(`Redis keys of the run at the end: ${keysLeft} (deleted)`);
  if (keysLeft > 2 * IDENTITIES)
    failures.push(`${keysLeft} Redis keys left: old identities did not expire`);

  // Heap: samples from the warm-up mark on.
  const late = samples.filter((s) => s.t >= WARMUP_MS / 1000 - 1);
  if (late.length >= 2) {
    const first = late[0]!;
    const lastS = late[late.length - 1]!;
    const growth = lastS.heapMB - first.heapMB;
    const n = late.length;
    const mt = late.reduce((a, s) => a + s.t, 0) / n;
    const mh = late.reduce((a, s) => a + s.heapMB, 0) / n;
    const slope =
      late.reduce((a, s) => a + (s.t - mt) * (s.heapMB - mh), 0) /
      (late.reduce((a, s) => a + (s.t - mt) ** 2, 0) || 1);
    const max = Math.max(...late.map((s) => s.heapMB));
    console.log(
      `app heap from t=${first.t.toFixed(0)} s to t=${lastS.t.toFixed(0)} s: ` +
        `${first.heapMB.toFixed(1)} -> ${lastS.heapMB.toFixed(1)} MB (growth ${growth.toFixed(2)} MB, ` +
        `max ${max.toFixed(1)} MB, slope ${(slope * 60).toFixed(3)} MB/min over ${n} samples); ` +
        `rss ${first.rssMB.toFixed(1)} -> ${lastS.rssMB.toFixed(1)} MB`,
    );
    if (growth >= MAX_GROWTH_MB)
      failures.push(`app heap grew ${growth.toFixed(1)} MB after warm-up`);
  } else {
    failures.push('too few heap samples after warm-up');
  }
  const complaints = app.log.filter((l) => /\b(WARN|ERROR)\b/.test(l));
  if (complaints.length) console.log(`the app logged:\n${complaints.slice(0, 10).join('\n')}`);
  // The store's own failures and recoveries, whatever the first lines were.
  const storeLines = app.log.filter((l) =>
    /backend_error|redis_unreachable|reachable again|circuit/.test(l),
  );
  if (storeLines.length)
    console.log(
      `the app's store lines (${storeLines.length}):\n${storeLines.slice(-30).join('\n')}`,
    );

  if (failures.length) console.log(`\nsoak FAILED:\n- ${failures.join('\n- ')}`);
  else console.log('\nsoak passed');
  return failures.length === 0;
}

main().then(
  (passed) => process.exit(passed ? 0 : 1),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
