/**
 * The failovers of `npm run soak` with SOAK_FAILOVER=sentinel: a private Sentinel group (a
 * primary, a replica, three Sentinels: test/harness/sentinel.ts) that the app connects
 * through, failed over every SOAK_FAILOVER_EVERY seconds under the soak's traffic,
 * alternately by `SENTINEL FAILOVER` (a handover) and by killing the primary (a crash; the
 * killed node is started again and rejoins as the replica, so the next failover has one).
 *
 * Each failover is a window, from the command (or the kill) until the app's client is seen
 * writing on the new primary (its first script call there): the time in which the old
 * primary may take writes the new one never sees (split brain, after a handover) or no
 * primary answers (fail-open). The soak bounds each identity's admissions by its quota plus
 * what it was admitted inside these windows, as the failover tests bound the over-admission
 * (test/failover/sentinel-failover.test.ts).
 */
import { redisCall, waitUntil } from '../test/harness/global-setup.js';
import { startSentinelGroup, type SentinelGroupHandle } from '../test/harness/sentinel.js';

/** One failover, in `performance.now()` ms. */
export interface FailoverWindow {
  kind: 'handover' | 'crash';
  /** When the command was sent or the primary killed. */
  from: number;
  /** When the app's client was first seen writing on the new primary. */
  to: number;
  oldPort: number;
  newPort: number;
}

/** EVALSHA and EVAL calls the data node on `port` has run (`INFO commandstats`). */
async function scriptCalls(port: number): Promise<number> {
  const info = String(await redisCall(port, 'INFO', 'commandstats').catch(() => ''));
  return [...info.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce(
    (n, m) => n + Number(m[1]),
    0,
  );
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class SentinelFailovers {
  readonly windows: FailoverWindow[] = [];

  private constructor(private readonly group: SentinelGroupHandle) {}

  static async start(): Promise<SentinelFailovers> {
    return new SentinelFailovers(await startSentinelGroup());
  }

  /** ioredis options that reach the primary of the moment through the Sentinels. */
  get redisOptions(): { sentinels: { host: string; port: number }[]; name: string } {
    return { sentinels: this.group.sentinels, name: this.group.name };
  }

  /** What the soak app reads to connect through the Sentinels (see soak-app.ts). */
  get env(): Record<string, string> {
    return {
      REDIS_SENTINELS: this.group.sentinels.map((s) => `${s.host}:${s.port}`).join(','),
      REDIS_SENTINEL_NAME: this.group.name,
    };
  }

  /**
   * Fails over every `everyMs` until `endsAt` (`performance.now()` ms), handover first, then
   * crash, alternately; logs each window. Resolves when no further failover fits.
   */
  async run(everyMs: number, startedAt: number, endsAt: number): Promise<void> {
    for (let n = 1; startedAt + n * everyMs < endsAt; n++) {
      await sleep(startedAt + n * everyMs - performance.now());
      const kind = n % 2 === 1 ? 'handover' : 'crash';
      const w = await this.failover(kind);
      console.log(
        `  failover ${n} (${kind}) at t=${((w.from - startedAt) / 1000).toFixed(0)} s: ` +
          `:${w.oldPort} -> :${w.newPort}, the app wrote on the new primary after ${(w.to - w.from).toFixed(0)} ms`,
      );
    }
  }

  private async failover(kind: FailoverWindow['kind']): Promise<FailoverWindow> {
    const oldPort = await this.group.primaryPort();
    const replica = await this.group.replicaPort();
    const before = await scriptCalls(replica);
    const from = performance.now();
    if (kind === 'handover')
      await redisCall(this.group.sentinels[0]!.port, 'SENTINEL', 'FAILOVER', this.group.name);
    else await this.group.kill(oldPort);
    const newPort = await this.group.waitForNewPrimary(oldPort, 60_000);
    await waitUntil(
      async () => (await scriptCalls(newPort)) > before,
      60_000,
      () => `the app never wrote on the new primary :${newPort}`,
      20,
    );
    const window = { kind, from, to: performance.now(), oldPort, newPort };
    this.windows.push(window);
    if (kind === 'crash') await this.group.rejoin(oldPort, 60_000);
    return window;
  }

  stop(): Promise<void> {
    return this.group.stop();
  }
}
