/**
 * Releases kept while the store fails (issue 22, finding 4): sent again once it answers,
 * dropped once their lease would have expired anyway (an injected clock), bounded in number.
 * The store here is a MemoryStore behind a switch that makes it unreachable.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { ReleaseRetries } from '../../lib/core/end/release-retries.js';
import { MemoryStore, type Lease } from '../../lib/index.js';

describe('ReleaseRetries', () => {
  let now = 1_000_000;
  const clock = () => now;
  const store = new MemoryStore({ clock });
  let down = true;
  const sent: Lease[][] = [];
  const send = (leases: readonly Lease[]) => {
    sent.push([...leases]);
    return down ? Promise.reject(new Error('store unreachable')) : store.release!(leases);
  };
  let retries: ReleaseRetries;
  afterEach(() => {
    retries.close();
    sent.length = 0;
    down = true;
  });

  const lease = (id: string, leaseMs = 30_000): Lease => ({ key: `rl:{a}:s:c:cc`, id, leaseMs });

  it('keeps what failed and sends it again once the store answers, then forgets it', async () => {
    retries = new ReleaseRetries(send, clock, 60_000);
    retries.keep([lease('one'), lease('two')], now);
    await retries.retry();
    expect(retries.size).toBe(2);
    down = false;
    retries.storeAnswered();
    await Promise.resolve();
    await retries.retry();
    expect(sent.at(-1)!.map((l) => l.id)).toEqual(['one', 'two']);
    expect(retries.size).toBe(0);
  });

  it('drops a lease once it would have expired anyway, without sending it', async () => {
    retries = new ReleaseRetries(send, clock, 60_000);
    retries.keep([lease('short', 1000), lease('long', 30_000)], now);
    now += 1000;
    down = false;
    await retries.retry();
    expect(sent.map((batch) => batch.map((l) => l.id))).toEqual([['long']]);
    expect(retries.size).toBe(0);
  });

  it('keeps at most `max`, dropping those kept first', async () => {
    retries = new ReleaseRetries(send, clock, 60_000, 3);
    retries.keep(
      ['a', 'b', 'c', 'd', 'e'].map((id) => lease(id)),
      now,
    );
    expect(retries.size).toBe(3);
    down = false;
    await retries.retry();
    expect(sent[0]!.map((l) => l.id)).toEqual(['c', 'd', 'e']);
  });

  // Review M5: 5,000 kept leases went in one call, bounded by one timeoutMs: it timed out as
  // a whole and was sent again every second until the leases expired.
  it('sends at most 100 leases a call, all at once; a failed call keeps only its own', async () => {
    retries = new ReleaseRetries(
      (leases) => {
        sent.push([...leases]);
        return leases.some((l) => l.id === 'n120')
          ? Promise.reject(new Error('timed out'))
          : store.release!(leases);
      },
      clock,
      60_000,
    );
    retries.keep(
      Array.from({ length: 250 }, (_, i) => lease(`n${i}`)),
      now,
    );
    await retries.retry();
    expect(sent.map((batch) => batch.length)).toEqual([100, 100, 50]);
    expect(retries.size).toBe(100);
    sent.length = 0;
    await retries.retry();
    expect(sent.map((batch) => [batch[0]!.id, batch.length])).toEqual([['n100', 100]]);
  });

  it('a lease kept twice is sent once', async () => {
    retries = new ReleaseRetries(send, clock, 60_000);
    retries.keep([lease('same')], now);
    retries.keep([lease('same')], now);
    expect(retries.size).toBe(1);
  });

  it('close forgets what is kept and keeps nothing more', async () => {
    retries = new ReleaseRetries(send, clock, 60_000);
    retries.keep([lease('one')], now);
    retries.close();
    retries.keep([lease('two')], now);
    await retries.retry();
    expect({ size: retries.size, sent: sent.length }).toEqual({ size: 0, sent: 0 });
  });
});
