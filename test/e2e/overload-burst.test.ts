/**
 * Overload protection with its defaults (`overload: true`) does not shed the burst of an
 * idle process: 25 concurrent calls fired at a fresh app (a trivial GET and a trivial async
 * GET, default priority `normal`) on a cold event loop, then again once warmed up, are all
 * answered 200. Before the turn's budget and the event loop's delay were gated on a busy
 * loop, and the floor raised to 50, a cold app answered 3 of 25 and shed 22.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import { AppProcess } from './support/app-process.js';
import { PLATFORMS, uniquePrefix } from './support/app.js';

const WORKER = fileURLToPath(new URL('./support/overload-burst-worker.ts', import.meta.url));

/** The statuses of `n` calls to `path` fired at once, counted. */
async function burst(app: AppProcess, path: string, n = 25): Promise<Record<number, number>> {
  const replies = await Promise.all(
    Array.from({ length: n }, () =>
      fetch(`${app.url}${path}`).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      }),
    ),
  );
  const counts: Record<number, number> = {};
  for (const status of replies) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

describe.each(PLATFORMS)('overload protection with its defaults on %s', (platform) => {
  let app: AppProcess | undefined;
  afterEach(async () => {
    await app?.stop();
    app = undefined;
  });

  it.each(['/', '/async'])(
    'admits 25 concurrent calls to %s on an idle process, cold and warmed up',
    async (path) => {
      const started = await AppProcess.start(WORKER, { platform, prefix: uniquePrefix() });
      app = started;
      // With the statuses, the log's shedding line if any: it says which signal shed.
      const seen = async (n?: number) => ({
        statuses: await burst(started, path, n),
        shedding: started.output.split('\n').filter((l) => l.includes('rate_limit.shedding')),
      });
      expect(await seen()).toEqual({ statuses: { 200: 25 }, shedding: [] });
      // Warmed up: calls one after the other, then the burst again.
      for (let i = 0; i < 10; i++) {
        expect(await seen(1)).toEqual({ statuses: { 200: 1 }, shedding: [] });
      }
      expect(await seen()).toEqual({ statuses: { 200: 25 }, shedding: [] });
    },
    60_000,
  );
});
