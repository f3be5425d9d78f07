/**
 * Issue 22, finding 3: a slot is given back before the response is written, so a client that
 * never has two requests in flight is never refused by a concurrency limit, whichever
 * instance it reaches. Two Nest apps in OS processes of their own on one Redis.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import { AppProcess } from './support/app-process.js';
import { PLATFORMS, uniquePrefix } from './support/app.js';

const WORKER = fileURLToPath(new URL('./support/slot-instance-worker.ts', import.meta.url));

describe.each(PLATFORMS)('two instances on %s, one Redis', (platform) => {
  const instances: AppProcess[] = [];
  afterAll(() => Promise.all(instances.map((i) => i.stop())));

  it('40 sequential requests alternating between them at @ConcurrencyLimit(1): none refused', async () => {
    const prefix = uniquePrefix();
    instances.push(
      ...(await Promise.all([
        AppProcess.start(WORKER, { platform, prefix }),
        AppProcess.start(WORKER, { platform, prefix }),
      ])),
    );
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) statuses.push((await instances[i % 2]!.get('/one')).status);
    expect({ refused: statuses.filter((s) => s === 429).length, sent: statuses.length }).toEqual({
      refused: 0,
      sent: 40,
    });
  }, 60_000);
});
