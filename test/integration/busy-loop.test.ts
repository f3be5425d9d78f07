/**
 * A busy event loop is not a store failure (issue 22, finding 1, at the limiter). Calls made
 * just before the process blocks its own event loop for three times `timeoutMs` (the load of a
 * flood, a long garbage collection) are decided by the store, and the circuit breaker stays
 * closed. On an auto-pipelining client (the module's own until issue 23) the commands are
 * written only in the loop's check phase, after the block: before the fix every call timed
 * out at that moment, unsent replies and all, and the breaker opened. On the module's client
 * now they are written at once and their replies wait unread through the block. The block itself is the
 * load under test, not a wait: nothing here sleeps to synchronise.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { RateLimiter, RedisStore } from '../../lib/index.js';
import { disconnect, redisUrl } from '../harness/redis.js';

// Generous for a loaded machine: Redis itself must answer within it once the loop turns again.
const TIMEOUT_MS = 250;

/** Keeps this process's event loop from turning for `ms` (no timer, no I/O meanwhile). */
function blockEventLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy: the event loop does not turn
  }
}

/**
 * Runs `work` in the event loop's check phase, as the handling of a request parsed in a busy
 * turn ends up: the commands it makes are written in the next check phase, after the timers
 * of that turn have run (so, before the fix, after the calls had timed out).
 */
function inCheckPhase(work: () => void): Promise<void> {
  return new Promise((resolve) =>
    setImmediate(() => {
      work();
      resolve();
    }),
  );
}

function tally(outcomes: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of outcomes) counts[o] = (counts[o] ?? 0) + 1;
  return counts;
}

// The module's own client writes each command at once (issue 23); a client passed in may
// auto-pipeline, which writes them in the check phase after the block.
describe.each([
  ['the module', false],
  ['an auto-pipelining', true],
])('a busy event loop is not a store failure, on %s client', (_name, enableAutoPipelining) => {
  let client: Redis;
  let limiter: RateLimiter;

  beforeAll(async () => {
    // Tuned as the module tunes the client it makes (lib/nest/module/resources.ts).
    client = new Redis(redisUrl(), {
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 0,
      enableAutoPipelining,
      lazyConnect: true,
    });
    await client.connect();
    limiter = new RateLimiter({
      store: new RedisStore({ client, controlRefreshMs: false }),
      prefix: `busy${randomUUID().slice(0, 8)}`,
      timeoutMs: TIMEOUT_MS,
      circuitBreaker: { failureThreshold: 5, cooldownMs: 60_000 },
    });
    // The script loaded, so nothing below waits for NOSCRIPT and EVAL.
    await limiter.consume('ip:warm', { rate: '3/m' });
  });
  afterAll(() => {
    if (client) disconnect(client);
  });

  it(`calls in flight while the loop is blocked for ${3 * TIMEOUT_MS} ms are decided, and the breaker stays closed`, async () => {
    let calls: Promise<string>[] = [];
    await inCheckPhase(() => {
      calls = Array.from({ length: 200 }, (_, i) =>
        limiter.consume(`ip:192.0.2.${i % 4}`, { rate: '3/m' }).then(
          (d) => (d.allowed ? 'admitted' : 'refused'),
          (e: { kind?: string }) => `failed: ${e.kind}`,
        ),
      );
      blockEventLoop(3 * TIMEOUT_MS);
    });
    const outcomes = await Promise.all(calls);
    // Four clients of 3 each: every call decided by Redis, none failed.
    expect(tally(outcomes)).toEqual({ admitted: 12, refused: 188 });
    expect(limiter.circuitState).toBe('closed');
  });

  it('and again, right after: the loop blocked twice in a row changes nothing', async () => {
    let calls: Promise<string>[] = [];
    await inCheckPhase(() => {
      calls = Array.from({ length: 100 }, () =>
        limiter.consume('ip:198.51.100.1', { rate: '3/m' }).then(
          (d) => (d.allowed ? 'admitted' : 'refused'),
          (e: { kind?: string }) => `failed: ${e.kind}`,
        ),
      );
      blockEventLoop(3 * TIMEOUT_MS);
    });
    // The next turn, once the commands are written: blocked again before their replies are read.
    await inCheckPhase(() => blockEventLoop(3 * TIMEOUT_MS));
    expect(tally(await Promise.all(calls))).toEqual({ admitted: 3, refused: 97 });
    expect(limiter.circuitState).toBe('closed');
  });
});
