/**
 * Sentinel failover under traffic (issue 16): the module connects through three Sentinels
 * (`redis: { sentinels, name }`), and while requests keep coming, the
 * primary is first handed over (`SENTINEL FAILOVER`), then killed. Throughout: no 5xx, no
 * request held beyond `timeoutMs` + 50 ms; afterwards counting goes on on the new primary
 * (whose script cache is empty: NOSCRIPT, then EVAL), and the count it holds differs from the
 * store-decided admissions by at most the writes replication had not carried, printed as
 * figures.
 *
 * The app runs in a process of its own (app-worker.ts), which measures how long each request
 * waited on the store. One fail-open route with a daily quota far above the traffic, so that every store answer
 * admits and carries `X-RateLimit-Remaining`: quota - remaining is the count the primary of
 * the moment holds, and the requests answered without headers are the fail-open admissions.
 */
import 'reflect-metadata';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { redisCall } from '../harness/global-setup.js';
import { startSentinelGroup, type SentinelGroupHandle } from '../harness/sentinel.js';
import { lateAfterMs } from '../../lib/core/call/store-progress.js';
import { pollUntil } from '../e2e/support/app.js';
import { AppProcess } from '../e2e/support/app-process.js';
import {
  errorCount,
  failoverFigures,
  scriptCalls,
  trafficUntil,
  type Holds,
  type Sample,
} from '../e2e/support/traffic.js';

const QUOTA = 1_000_000;
const WORKER = fileURLToPath(new URL('./app-worker.ts', import.meta.url));

const TIMEOUT_MS = 100;
/** Requests in flight at once: also the bound on writes a crash can lose. */
const CONCURRENCY = 3;

describe('Sentinel failover under traffic', () => {
  let group: SentinelGroupHandle;
  let h: AppProcess;

  beforeAll(async () => {
    group = await startSentinelGroup();
    h = await AppProcess.start(WORKER, {
      sentinels: group.sentinels,
      name: group.name,
      timeoutMs: TIMEOUT_MS,
      quota: QUOTA,
    });
  }, 30_000);
  afterAll(async () => {
    await h?.stop();
    await group?.stop();
  });

  it('SENTINEL FAILOVER then a killed primary: no 5xx, no request beyond timeoutMs + 50 ms, counting resumes on the new primary', async () => {
    const samples: Sample[] = [];
    const storedSince = (t: number) => samples.filter((s) => s.at >= t && s.stored).length;
    let stop = false;
    const traffic = trafficUntil(h, '/hit', 'sentinel', CONCURRENCY, samples, () => stop, 40_000);
    let handover = 0;
    let switched = 0;
    let noscript = 0;
    try {
      // Healthy: the store decides.
      expect(await pollUntil(async () => storedSince(0) >= 50, 10_000)).toBe(true);

      // 1. A handover: the replica is promoted, the old primary becomes its replica.
      const first = await group.primaryPort();
      handover = performance.now();
      await redisCall(group.sentinels[0]!.port, 'SENTINEL', 'FAILOVER', group.name);
      const second = await group.waitForNewPrimary(first, 20_000);
      // The old primary takes writes until the module's client leaves it: split brain, whose
      // writes the new primary never sees. Switched = the first script call on the new one.
      expect(await pollUntil(async () => (await scriptCalls(second)) > 0, 15_000)).toBe(true);
      switched = performance.now();
      expect(await pollUntil(async () => storedSince(switched) >= 50, 15_000)).toBe(true);
      // Its script cache was empty: the store met NOSCRIPT and sent the script with EVAL.
      noscript = await errorCount(second, 'NOSCRIPT');
      expect(noscript).toBeGreaterThanOrEqual(1);

      // 2. A crash: the new primary is killed, the Sentinels promote the old one back.
      await group.kill(second);
      expect(await group.waitForNewPrimary(second, 20_000)).toBe(first);
      const promoted = performance.now();
      expect(await pollUntil(async () => storedSince(promoted) >= 50, 15_000)).toBe(true);
    } finally {
      stop = true;
      await traffic;
    }

    const holds = (await h.get('/holds')).body as Holds;
    const f = failoverFigures(samples, QUOTA, handover, switched, TIMEOUT_MS + 50);
    console.log(
      `sentinel failover figures: ${JSON.stringify({ ...f, holds, noscript, switchMs: Math.round(switched - handover) })}`,
    );
    expect(f.statuses).toEqual([200]);
    // Held = waiting on the store, measured in the app's own process (onDecision's
    // durationMs, from the store call to its answer or failure): the stalls of this process,
    // which sends the traffic and polls Redis, are not in it; the app's own are.
    // A call whose timer the app itself ran late (its event loop stalled: a loaded machine)
    // gets another timeoutMs rather than failing open (issue 22, finding 1).
    const stalled = holds.loopDelayMaxMs >= lateAfterMs(TIMEOUT_MS);
    expect(holds.maxMs).toBeLessThanOrEqual(TIMEOUT_MS + 50 + (stalled ? TIMEOUT_MS : 0));
    // Lost writes: the old primary's after the replica was promoted and before the client left
    // it (split brain), and a crashed primary's not yet sent to its replica (one per request
    // in flight). Counted writes whose reply was lost (admitted fail-open) go the other way,
    // one per request in flight at each switch.
    expect(f.overAdmission).toBeLessThanOrEqual(f.splitBrain + CONCURRENCY);
    expect(f.overAdmission).toBeGreaterThanOrEqual(-2 * CONCURRENCY);
  }, 60_000);
});
