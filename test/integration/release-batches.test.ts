/**
 * Releases kept during an outage, sent again to a real Redis (issue 22, review of M5): they
 * span many identities, one script call each. Sent one after the other inside a call bounded
 * by `timeoutMs`, 10,000 of them (10 identities per ms of round trip) never fit, and all
 * stayed kept, retry after retry, until their leases expired.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { ReleaseRetries } from '../../lib/core/end/release-retries.js';
import { releaseCall } from '../../lib/core/end/request-end-calls.js';
import { StoreProgress } from '../../lib/core/call/store-progress.js';
import { RedisStore, type Lease } from '../../lib/index.js';
import { disconnect, newRedis } from '../harness/redis.js';

describe('kept releases against Redis, sent in batches bounded by timeoutMs', () => {
  let client: Redis;
  let store: RedisStore;
  beforeAll(async () => {
    client = newRedis({ autoResendUnfulfilledCommands: false });
    store = new RedisStore({ client, controlRefreshMs: false });
    // The script loaded, so the calls below are EVALSHA only.
    await store.release([{ key: 'warm:{w}:c', id: 'w' }]);
  });
  afterAll(() => disconnect(client));

  it('10,000 leases of 10,000 identities, timeoutMs 100: one retry gives them all back', async () => {
    const run = randomUUID().slice(0, 8);
    const leases: Lease[] = Array.from({ length: 10_000 }, (_, i) => ({
      key: `${run}:{id${i}}:c`,
      id: `l${i}`,
      leaseMs: 60_000,
    }));
    const bounds = { timeoutMs: 100, breaker: undefined, progress: new StoreProgress(1000) };
    const retries = new ReleaseRetries(
      (batch) => releaseCall(store, bounds, batch),
      Date.now,
      600_000,
    );
    retries.keep(leases, Date.now());
    await retries.retry();
    expect(retries.size).toBe(0);
    retries.close();
  });
});
