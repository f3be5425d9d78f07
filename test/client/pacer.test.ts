/**
 * The cooperative client's pacer: what it holds back and for how
 * long, on Jest's fake clock (Date.now and timers together).
 */
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { parseRateLimitFields } from '../../lib/client/index.js';
import { Pacer, type Ticket } from '../../lib/client/pacer.js';

const fields = (headers: Record<string, string>) => parseRateLimitFields(headers);
/** True when `promise` has settled after the microtasks queued so far. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return done;
}

/** `ticket` once the fake clock has moved `ms`: still held 1 ms before, released at `ms`. */
async function releasedAfter(ticket: Promise<Ticket>, ms: number): Promise<Ticket> {
  await jest.advanceTimersByTimeAsync(ms - 1);
  expect(await settled(ticket)).toBe(false);
  await jest.advanceTimersByTimeAsync(1);
  return ticket;
}

describe('Pacer', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('learns a partition from its first answer, then lets a burst through while quota lasts', async () => {
    const pacer = new Pacer();
    const first = await pacer.reserve('a', 60_000);
    const second = pacer.reserve('a', 60_000);
    expect(await settled(second)).toBe(false);
    pacer.observe(first, fields({ ratelimit: '"q";r=3;t=1', 'ratelimit-policy': '"q";q=5;w=1' }));
    expect(await settled(second)).toBe(true);
    const burst = [pacer.reserve('a', 60_000), pacer.reserve('a', 60_000)];
    expect(await settled(Promise.all(burst))).toBe(true);
    // Quota spent (3 sent since the answer said 3): nothing is sure to be back before the reset
    // (t=1), so the next leaves then, and the one after it an emission interval (200 ms) and a
    // 5% margin later.
    const paced = [pacer.reserve('a', 60_000), pacer.reserve('a', 60_000)];
    await jest.advanceTimersByTimeAsync(999);
    expect(await settled(paced[0]!)).toBe(false);
    await jest.advanceTimersByTimeAsync(211);
    expect((await Promise.all(paced)).map((t) => t.waitedMs)).toEqual([1000, 1210]);
  });

  it('with none left in a fixed window, waits for its reset rather than an emission interval', async () => {
    const pacer = new Pacer();
    const first = await pacer.reserve('a', 60_000);
    // 5 per 2 s, spent: an emission interval (400 ms) later the window would still refuse.
    pacer.observe(first, fields({ ratelimit: '"w";r=0;t=2', 'ratelimit-policy': '"w";q=5;w=2' }));
    const next = pacer.reserve('a', 60_000);
    expect((await releasedAfter(next, 2000)).waitedMs).toBe(2000);
  });

  it('past a reset, does not take the quota as full again: one request learns it first', async () => {
    const pacer = new Pacer();
    const first = await pacer.reserve('a', 60_000);
    pacer.observe(
      first,
      fields({ ratelimit: '"b";r=0;t=36', 'ratelimit-policy': '"b";q=100;w=3600' }),
    );
    await jest.advanceTimersByTimeAsync(40_000);
    const probe = await pacer.reserve('a', 60_000);
    const burst = pacer.reserve('a', 60_000);
    expect(await settled(burst)).toBe(false);
    pacer.observe(
      probe,
      fields({ ratelimit: '"b";r=0;t=36', 'ratelimit-policy': '"b";q=100;w=3600' }),
    );
    // The answer says none is left: the burst waits for the next reset.
    expect(await settled(burst)).toBe(false);
    await jest.advanceTimersByTimeAsync(36_000);
    expect((await burst).waitedMs).toBe(36_000);
  });

  it('without a reported reset (X-RateLimit-* with no -Reset), sends requests at once, not one by one', async () => {
    const pacer = new Pacer();
    const first = await pacer.reserve('a', 60_000);
    pacer.observe(first, fields({ 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '4000' }));
    const many = Array.from({ length: 10 }, () => pacer.reserve('a', 60_000));
    expect(await settled(Promise.all(many))).toBe(true);
    expect((await Promise.all(many)).every((t) => t.waitedMs === 0)).toBe(true);
  });

  it('holds the others at most 2 s behind a first request that never answers, and counts the wait', async () => {
    const pacer = new Pacer();
    await pacer.reserve('a', 60_000);
    const waiting = pacer.reserve('a', 60_000);
    expect((await releasedAfter(waiting, 2000)).waitedMs).toBe(2000);
  });

  it('never holds a request past its own budget to learn', async () => {
    const pacer = new Pacer();
    await pacer.reserve('a', 60_000);
    const short = pacer.reserve('a', 300);
    await jest.advanceTimersByTimeAsync(300);
    expect((await short).waitedMs).toBe(300);
  });

  it("holds a partition for a refusal's Retry-After, but not for a Retry-After on another status (202)", async () => {
    const pacer = new Pacer();
    const accepted = await pacer.reserve('a', 60_000);
    pacer.observe(accepted, fields({ 'retry-after': '30', ratelimit: '"q";r=9;t=60' }), false);
    expect(await settled(pacer.reserve('a', 60_000))).toBe(true);

    const refused = await pacer.reserve('b', 60_000);
    pacer.observe(refused, fields({ 'retry-after': '30', ratelimit: '"q";r=0;t=30' }), true);
    const next = pacer.reserve('b', 60_000);
    expect((await releasedAfter(next, 30000)).waitedMs).toBe(30_000);
  });

  it('keeps partitions apart: a refusal on one path holds nothing on another', async () => {
    const pacer = new Pacer();
    const login = await pacer.reserve('http://api/login', 60_000);
    pacer.observe(login, fields({ 'retry-after': '12', ratelimit: '"d";r=0;t=12' }), true);
    expect(await settled(pacer.reserve('http://api/orders', 60_000))).toBe(true);
  });

  it('keeps at most 1000 partitions, the least recently used going first', async () => {
    const pacer = new Pacer();
    const tickets: Ticket[] = [];
    for (let i = 0; i < 1000; i++) tickets.push(await pacer.reserve(`p${i}`, 60_000));
    // p0 used again: p1 is now the least recently used.
    pacer.observe(tickets[0]!, fields({ ratelimit: '"q";r=9;t=60' }));
    await pacer.reserve('p0', 60_000);
    await pacer.reserve('p1000', 60_000);
    expect(pacer.size).toBe(1000);
    expect(pacer.holds('p0')).toBe(true);
    expect(pacer.holds('p1')).toBe(false);
    expect(pacer.holds('p1000')).toBe(true);
  });

  it('gives an aborted wait its place back: the next request goes when the aborted one would have', async () => {
    const pacer = new Pacer();
    const first = await pacer.reserve('a', 60_000);
    pacer.observe(first, fields({ ratelimit: '"q";r=0;t=1', 'ratelimit-policy': '"q";q=5;w=1' }));
    const controller = new AbortController();
    const aborted = pacer.reserve('a', 60_000, controller.signal);
    controller.abort(new Error('gone'));
    await expect(aborted).rejects.toThrow('gone');
    const next = pacer.reserve('a', 60_000);
    await jest.advanceTimersByTimeAsync(1000);
    expect((await next).waitedMs).toBe(1000);
  });

  describe('without a stated window (X-RateLimit-* of @nestjs/throttler, express-rate-limit legacy headers, standard: false)', () => {
    const spent = {
      'x-ratelimit-limit': '5',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '1',
    };

    it('releases one request at the reset and the others only on its answer, not a herd at the reset', async () => {
      const pacer = new Pacer();
      pacer.observe(await pacer.reserve('a', 60_000), fields(spent));
      // The rest of a burst of 25, all waiting for the reset.
      const waiting = Array.from({ length: 24 }, () => pacer.reserve('a', 60_000));
      await jest.advanceTimersByTimeAsync(1000);
      const released = [];
      for (const w of waiting) if (await settled(w)) released.push(await w);
      expect(released.map((t) => t.waitedMs)).toEqual([1000]);
      // Its answer: 4 left of a fresh window, which the next 4 take at once.
      await jest.advanceTimersByTimeAsync(5);
      pacer.observe(released[0]!, fields({ ...spent, 'x-ratelimit-remaining': '4' }));
      const next = [];
      for (const w of waiting.slice(1)) if (await settled(w)) next.push(await w);
      expect(next.map((t) => t.waitedMs)).toEqual([1005, 1005, 1005, 1005]);
    });

    it('waits the whole second a window takes after a fresh one, not a rounded-up epoch reset 2 s away', async () => {
      jest.setSystemTime(1_800_000_000_005);
      const pacer = new Pacer();
      const first = await pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(5);
      // A 1 s window begun between the send and the answer (5 ms later), its end rounded up by
      // the server to the next epoch second, 1.99 s away.
      const epoch = String(1_800_000_002);
      const legacy = (remaining: number) =>
        fields({
          'x-ratelimit-limit': '5',
          'x-ratelimit-remaining': String(remaining),
          'x-ratelimit-reset': epoch,
        });
      pacer.observe(first, legacy(4));
      const burst = Array.from({ length: 4 }, () => pacer.reserve('a', 60_000));
      const tickets = await Promise.all(burst);
      // The later answers of the same window report the same rounded reset: the end stays.
      for (const [i, t] of tickets.entries()) pacer.observe(t, legacy(3 - i));
      const next = pacer.reserve('a', 60_000);
      expect((await releasedAfter(next, 1000)).waitedMs).toBe(1000);
    });

    it('with none left and no reset, probes after 1 s, not 60 s; never past its own budget', async () => {
      const pacer = new Pacer();
      pacer.observe(
        await pacer.reserve('a', 60_000),
        fields({ 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '0' }),
      );
      expect((await pacer.reserve('a', 500)).waitedMs).toBe(0);
      const probe = pacer.reserve('a', 60_000);
      expect((await releasedAfter(probe, 1000)).waitedMs).toBe(1000);
    });

    it('releases one more learner, not the whole queue, when the learner at the reset is unanswered after 2 s', async () => {
      const pacer = new Pacer();
      pacer.observe(await pacer.reserve('a', 60_000), fields(spent));
      const waiting = Array.from({ length: 24 }, () => pacer.reserve('a', 60_000));
      const leave = async () => {
        const left = [];
        for (const w of waiting) if (await settled(w)) left.push(await w);
        return left.map((t) => t.waitedMs);
      };
      await jest.advanceTimersByTimeAsync(1000);
      expect(await leave()).toEqual([1000]);
      // The learner sent at the reset never answers: 2 s later one more goes, the rest wait.
      await jest.advanceTimersByTimeAsync(1999);
      expect(await leave()).toEqual([1000]);
      await jest.advanceTimersByTimeAsync(1);
      const second = await waiting[1]!;
      expect(await leave()).toEqual([1000, 3000]);
      // Its answer: 4 left, less the first learner still in flight: the next 3 go at once.
      await jest.advanceTimersByTimeAsync(5);
      pacer.observe(second, fields({ ...spent, 'x-ratelimit-remaining': '4' }));
      expect(await leave()).toEqual([1000, 3000, 3005, 3005, 3005]);
    });

    it('backs the probe of a spent quota with no reset off: 1, 2, 4, 8, 16 s, then every 30 s, and 1 s again once quota shows', async () => {
      const pacer = new Pacer();
      const none = () => fields({ 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '0' });
      pacer.observe(await pacer.reserve('a', 60_000), none());
      for (const waitMs of [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]) {
        const probe = pacer.reserve('a', 60_000);
        await jest.advanceTimersByTimeAsync(waitMs - 1);
        expect(await settled(probe)).toBe(false);
        await jest.advanceTimersByTimeAsync(1);
        const ticket = await probe;
        expect(ticket.waitedMs).toBe(waitMs);
        pacer.observe(ticket, none());
      }
      const probe = pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(30_000);
      pacer.observe(
        await probe,
        fields({ 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '2' }),
      );
      const two = [pacer.reserve('a', 60_000), pacer.reserve('a', 60_000)];
      expect((await Promise.all(two)).map((t) => t.waitedMs)).toEqual([0, 0]);
      const third = pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(1000);
      expect((await third).waitedMs).toBe(1000);
    });

    it('never backs the probe off past the budget of the request that probed (maxWaitMs 5 s: 1, 2, 4, 5, 5 s)', async () => {
      const pacer = new Pacer();
      const none = () => fields({ 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '0' });
      pacer.observe(await pacer.reserve('a', 5000), none());
      for (const waitMs of [1000, 2000, 4000, 5000, 5000]) {
        const probe = pacer.reserve('a', 5000);
        await jest.advanceTimersByTimeAsync(waitMs);
        const ticket = await probe;
        expect(ticket.waitedMs).toBe(waitMs);
        pacer.observe(ticket, none());
      }
    });

    it('keeps reading whole-second ends window after window while they hold (1 s windows, epoch resets)', async () => {
      jest.setSystemTime(1_800_000_000_005);
      const pacer = new Pacer();
      const legacy = (remaining: number, epoch: number) =>
        fields({
          'x-ratelimit-limit': '5',
          'x-ratelimit-remaining': String(remaining),
          'x-ratelimit-reset': String(epoch),
        });
      let learner = await pacer.reserve('a', 60_000);
      const waited = [];
      for (const epoch of [1_800_000_002, 1_800_000_003, 1_800_000_004]) {
        // Each learner's window begins on its arrival and ends 1 s later, rounded up by the
        // server to the next epoch second; answered 4 ms after the send.
        await jest.advanceTimersByTimeAsync(4);
        pacer.observe(learner, legacy(4, epoch));
        const burst = await Promise.all(
          Array.from({ length: 4 }, () => pacer.reserve('a', 60_000)),
        );
        for (const [i, t] of burst.entries()) pacer.observe(t, legacy(3 - i, epoch));
        const next = pacer.reserve('a', 60_000);
        await jest.advanceTimersByTimeAsync(1000);
        learner = await next;
        waited.push(learner.waitedMs);
      }
      expect(waited).toEqual([1000, 1000, 1000]);
    });

    it('takes resets as sent once a whole-second end read from a fresh window proved early (a 1.5 s window): one 429, not one a window', async () => {
      jest.setSystemTime(1_800_000_000_005);
      const pacer = new Pacer();
      const legacy = (remaining: number, epoch: number, retryAfter?: string) =>
        fields({
          'x-ratelimit-limit': '5',
          'x-ratelimit-remaining': String(remaining),
          'x-ratelimit-reset': String(epoch),
          ...(retryAfter === undefined ? {} : { 'retry-after': retryAfter }),
        });
      const window = async (epoch: number) => {
        const burst = await Promise.all(
          Array.from({ length: 4 }, () => pacer.reserve('a', 60_000)),
        );
        for (const [i, t] of burst.entries()) pacer.observe(t, legacy(3 - i, epoch));
      };
      const first = await pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(4);
      // A 1.5 s window begun on arrival (2 ms after the send), ending at 1.507 s; its end
      // rounded up to the epoch second, 1,800,000,002. Read as a 1 s window, it would end at
      // 1.009 s.
      pacer.observe(first, legacy(4, 1_800_000_002));
      await window(1_800_000_002);
      const early = pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(1000);
      const learner = await early;
      expect(learner.waitedMs).toBe(1000);
      // Sent before the true end: refused, the window still running.
      pacer.observe(learner, legacy(0, 1_800_000_002, '1'), true);
      const retried = pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(1000);
      const retry = await retried;
      expect(retry.waitedMs).toBe(1000);
      // At 2.009 s a new window (to 3.509 s, reported 1,800,000,004): no longer read as 1 s
      // (3.009 s, refused again), its reset is taken as sent, 1,991 ms away.
      pacer.observe(retry, legacy(4, 1_800_000_004));
      await window(1_800_000_004);
      const next = pacer.reserve('a', 60_000);
      expect((await releasedAfter(next, 1991)).waitedMs).toBe(1991);
    });

    it('with no reset, probes 1 s after the last unit was taken rather than at the re-learn time', async () => {
      const pacer = new Pacer();
      pacer.observe(
        await pacer.reserve('a', 60_000),
        fields({ 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '2' }),
      );
      const two = [pacer.reserve('a', 60_000), pacer.reserve('a', 60_000)];
      expect((await Promise.all(two)).map((t) => t.waitedMs)).toEqual([0, 0]);
      const third = pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(1000);
      expect((await third).waitedMs).toBe(1000);
    });
  });

  describe('on a server that sends only Retry-After', () => {
    const refusal = () => fields({ 'retry-after': '1' });
    const ok = () => fields({});

    it('a 1 s Retry-After holds the retry 1 s, not 60 s, and a fresh request 3 s later goes at once', async () => {
      const pacer = new Pacer();
      pacer.observe(await pacer.reserve('a', 60_000), refusal(), true);
      const retried = pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(999);
      expect(await settled(retried)).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      const ticket = await retried;
      expect(ticket.waitedMs).toBe(1000);
      pacer.observe(ticket, ok());
      await jest.advanceTimersByTimeAsync(3000);
      expect((await pacer.reserve('a', 60_000)).waitedMs).toBe(0);
    });

    it('a 1 s Retry-After after an answer without fields holds 1 s, not the 60 s re-learn time', async () => {
      const pacer = new Pacer();
      pacer.observe(await pacer.reserve('a', 60_000), ok());
      pacer.observe(await pacer.reserve('a', 60_000), refusal(), true);
      const next = pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(1000);
      expect((await next).waitedMs).toBe(1000);
    });

    it('after such a refusal, sends one request at a time for 60 s: each waits for the answer before it', async () => {
      const pacer = new Pacer();
      pacer.observe(await pacer.reserve('a', 60_000), refusal(), true);
      await jest.advanceTimersByTimeAsync(1000);
      const first = await pacer.reserve('a', 60_000);
      const second = pacer.reserve('a', 60_000);
      const third = pacer.reserve('a', 60_000);
      await jest.advanceTimersByTimeAsync(3);
      expect(await settled(second)).toBe(false);
      pacer.observe(first, ok());
      expect((await second).waitedMs).toBe(3);
      expect(await settled(third)).toBe(false);
      pacer.observe(await second, ok());
      expect((await third).waitedMs).toBe(3);
      pacer.observe(await third, ok());
      // 60 s without a refusal: a burst goes at once again once one answer is in.
      await jest.advanceTimersByTimeAsync(60_000);
      pacer.observe(await pacer.reserve('a', 60_000), ok());
      const burst = [pacer.reserve('a', 60_000), pacer.reserve('a', 60_000)];
      expect((await Promise.all(burst)).map((t) => t.waitedMs)).toEqual([0, 0]);
    });
  });

  it('waits at most 2 s for each answer, not 2 s in all, behind learners that answer in turn', async () => {
    const pacer = new Pacer();
    pacer.observe(await pacer.reserve('a', 60_000), fields({ 'retry-after': '1' }), true);
    await jest.advanceTimersByTimeAsync(1000);
    let learner = await pacer.reserve('a', 60_000);
    const queued = [pacer.reserve('a', 60_000), pacer.reserve('a', 60_000)];
    // Each learner answers 1.5 s after it left: the last of the queue leaves after 3 s.
    for (const next of queued) {
      await jest.advanceTimersByTimeAsync(1500);
      expect(await settled(next)).toBe(false);
      pacer.observe(learner, fields({}));
      learner = await next;
    }
    expect(learner.waitedMs).toBe(3000);
  });

  it('paces 5% wider than w / q: the sixth of a 5-per-1-s window no longer lands on its edge', async () => {
    const pacer = new Pacer();
    pacer.observe(
      await pacer.reserve('a', 60_000),
      fields({ ratelimit: '"q";r=0;t=1', 'ratelimit-policy': '"q";q=5;w=1' }),
    );
    const paced = Array.from({ length: 6 }, () => pacer.reserve('a', 60_000));
    await jest.advanceTimersByTimeAsync(2050);
    expect((await Promise.all(paced)).map((t) => t.waitedMs)).toEqual([
      1000, 1210, 1420, 1630, 1840, 2050,
    ]);
  });
});
