import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Cluster, Redis } from 'ioredis';
import { RateLimitBackendError, RateLimiter, RedisStore } from '../../lib/index.js';
import { ALGORITHMS } from '../../lib/core/model/policy.js';
import { ALGORITHM_IMPLS } from '../../lib/core/algorithms/index.js';
import { CONSUME_SCRIPT } from '../../lib/core/stores/redis/lua/consume.js';
import { REFUND_SCRIPT } from '../../lib/core/stores/redis/lua/refund.js';
import {
  ALGORITHM_CODES,
  WITH_CAPACITY_AND_COST,
} from '../../lib/core/stores/redis/lua/protocol.js';
import { outcomesOf, type ScriptReply } from '../../lib/core/stores/redis/reply.js';
import type { StorePolicy } from '../../lib/core/stores/store.js';
import { replaySettings } from '../../lib/core/stores/redis/scripting.js';
import { commandCalls, startRedisServer, type RedisServerHandle } from '../harness/redis.js';

/** The count of one command in `INFO commandstats`. */
async function calls(client: Redis, command: string): Promise<number> {
  return (await commandCalls(client))[command] ?? 0;
}

// A private server: these tests flush its scripts, pause it and read its command counts.
describe('the consume script on a private Redis', () => {
  let server: RedisServerHandle;
  let admin: Redis;
  let client: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
    // Tuned as a limiter's client should be: fail fast, never re-send.
    client = new Redis(server.url, {
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 0,
    });
    await client.ping();
  });

  afterAll(async () => {
    admin.disconnect();
    client.disconnect();
    await server.stop();
  });

  it('after SCRIPT FLUSH the next call succeeds and counts once, via one EVAL', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore({ client }),
      prefix: 'flush',
      timeoutMs: 5000,
    });
    expect((await limiter.consume('a', { rate: '10/h' })).policies[0]!.remaining).toBe(9);
    await admin.script('FLUSH');
    await admin.config('RESETSTAT');
    const d = await limiter.consume('a', { rate: '10/h' });
    expect(d.allowed).toBe(true);
    expect(d.policies[0]!.remaining).toBe(8);
    expect([await calls(admin, 'evalsha'), await calls(admin, 'eval')]).toEqual([1, 1]);
    // The script is cached again: back to EVALSHA alone.
    expect((await limiter.consume('a', { rate: '10/h' })).policies[0]!.remaining).toBe(7);
    expect([await calls(admin, 'evalsha'), await calls(admin, 'eval')]).toEqual([2, 1]);
  });

  it('a call that times out is not replayed: paused past the timeout, it counts at most once', async () => {
    const store = new RedisStore({ client });
    const impatient = new RateLimiter({ store, prefix: 'pause', timeoutMs: 50 });
    const patient = new RateLimiter({ store, prefix: 'pause', timeoutMs: 10_000 });
    const policy = { rate: '10/h' };
    await patient.consume('b', policy);
    await admin.config('RESETSTAT');
    await admin.client('PAUSE', 400, 'WRITE');
    const late = impatient.consume('b', policy);
    await expect(late).rejects.toBeInstanceOf(RateLimitBackendError);
    await expect(late).rejects.toMatchObject({ kind: 'timeout' });
    // Same connection, so this reply comes after the paused call has run.
    const after = await patient.peek('b', policy);
    expect(after.policies[0]!.remaining).toBe(8);
    expect(await calls(admin, 'evalsha')).toBe(2);
  });

  it.each(ALGORITHMS)(
    "%s: every write the script sends sets an expiry >= 1 ms, or keeps the window's, at high rates",
    async (algorithm) => {
      const base = new Redis(server.url);
      const monitor = await base.monitor();
      const sets: string[][] = [];
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (['SET', 'PSETEX', 'PEXPIRE', 'INCRBY'].includes(args[0]!.toUpperCase()))
          sets.push(args);
      });
      const limiter = new RateLimiter({
        store: new RedisStore({ client }),
        prefix: `px${algorithm}`,
        timeoutMs: 5000,
      });
      const rates = ['1000/s', '3000/s', '10/500ms', '7/13s', '1/ms'];
      for (let i = 0; i < 50; i++) {
        const rate = rates[i % rates.length]!;
        await limiter.consume(
          `id${i % 7}`,
          { rate, algorithm, name: `r${i % rates.length}` },
          { cost: 1 + (i % 2) },
        );
      }
      // MONITOR lines arrive asynchronously: an ECHO sent after the last call marks the end.
      const marker = `end-${algorithm}`;
      const ended = new Promise<void>((resolve) =>
        monitor.on('monitor', (_time: string, args: string[]) => {
          if (args[0]?.toUpperCase() === 'ECHO' && args[1] === marker) resolve();
        }),
      );
      await client.echo(marker);
      await ended;
      monitor.disconnect();
      base.disconnect();
      expect(sets.length).toBeGreaterThan(10);
      let kept = 0;
      for (const args of sets) {
        const command = args[0]!.toUpperCase();
        // A window that goes on keeps the expiry its key was given when it opened: the
        // sliding window rewrites its value with KEEPTTL (or adds to its packed counts), the
        // fixed window adds to its count.
        if (command === 'SET' && args[3]?.toUpperCase() === 'KEEPTTL') {
          expect(ALGORITHM_IMPLS[algorithm].lua.kind).toBe('value');
          kept++;
          continue;
        }
        if (command === 'INCRBY') {
          expect(['fixed-window', 'sliding-window']).toContain(algorithm);
          expect(args[2]).toMatch(/^[1-9]\d*$/);
          kept++;
          continue;
        }
        if (command === 'SET') expect(args[3]?.toUpperCase()).toBe('PX');
        const px = Number(args[command === 'SET' ? 4 : 2]); // PSETEX and PEXPIRE: <key> <ms>
        expect(Number.isInteger(px)).toBe(true);
        expect(px).toBeGreaterThanOrEqual(1);
      }
      // The windows keep it while the window goes on; the sliding log always moves it.
      expect(kept > 0).toBe(algorithm === 'fixed-window' || algorithm === 'sliding-window');
      // KEEPTTL keeps an expiry only where the window's first write set one: no key of this
      // limiter is left without (a KEEPTTL on a window's first write left one that never
      // expired, PTTL -1, and every check above still passed).
      const keys = await admin.keys(`px${algorithm}:*`);
      expect(keys.length).toBeGreaterThan(0);
      const ttls = await Promise.all(keys.map((key) => admin.pttl(key)));
      expect(ttls.filter((ttl) => ttl === -1)).toEqual([]);
    },
  );

  it.each(ALGORITHMS)(
    '%s: at 1000/s, on the Redis clock, the key exists right after an admitted call',
    async (algorithm) => {
      const code = ALGORITHM_CODES[algorithm];
      const { kind } = ALGORITHM_IMPLS[algorithm].lua;
      const key = `hot:{x}:${algorithm}`;
      for (let i = 0; i < 20; i++) {
        // MULTI runs EXISTS straight after the script, with no round trip in between.
        const [[, reply], [, exists]] = (await admin
          .multi()
          .eval(CONSUME_SCRIPT, 1, key, 'c', code, 1000, 1000)
          .exists(key)
          .exec()) as [[null, unknown], [null, number]];
        // The state as it stood: no debt, no window open (count 0 and 0 ms left, as one
        // integer), no sliding window counts (as one integer: the ms into the window), or no
        // log yet.
        if (algorithm === 'sliding-window') {
          expect(reply).toBeGreaterThanOrEqual(0);
          expect(reply).toBeLessThan(1000);
        } else {
          expect(reply).toEqual(kind === 'value' ? [null, expect.any(Number)] : 0);
        }
        expect(exists).toBe(1);
        await admin.del(key);
      }
    },
  );

  it('a policy sends capacity and cost only with its code + 10; the next policy is read after them', async () => {
    // On a test clock (mode c<now>), so the debts replied are exact. GCRA 10 per 100 s with
    // capacity 40 and cost 3 (code 14), then a token bucket 5 per 100 s, capacity = limit,
    // cost 1 (code 3, no capacity or cost sent).
    const keys = ['form:{y}:gcra', 'form:{y}:tb'];
    const args = [14, 10, 100_000, 40, 3, 3, 5, 100_000];
    expect(await admin.eval(CONSUME_SCRIPT, 2, ...keys, 'c1000000', ...args)).toEqual([0, 0]);
    // Debts in ticks of 1/limit ms: 3 × 100000 and 1 × 100000.
    expect(await admin.eval(CONSUME_SCRIPT, 2, ...keys, 'c1000000', ...args)).toEqual([
      300_000, 100_000,
    ]);
    // Cost 0 in the long form reads and writes nothing.
    expect(
      await admin.eval(CONSUME_SCRIPT, 1, 'form:{y}:peek', 'c1000000', 14, 10, 100_000, 10, 0),
    ).toBe(0);
    expect(await admin.exists('form:{y}:peek')).toBe(0);
    await admin.del(...keys);
  });

  it('a sliding-window value the script reads as no state is no state in what RedisStore reports', async () => {
    // Regression: RedisStore's decoder took Number(' 0') and Number('1e1') for counts where
    // the script's pattern (%d+) takes the value for none: the script admitted cost 2 and
    // wrote a window of 2, and the caller was told it was refused (a window of 4 or 10).
    const key = 'junk:{z}:sw';
    const now = 1_800_000_000_000;
    const index = now / 60_000;
    const policy: StorePolicy = {
      key,
      algorithm: 'sliding-window',
      limit: 5,
      periodMs: 60_000,
      capacity: 5,
      cost: 2,
    };
    const code = ALGORITHM_CODES['sliding-window'] + WITH_CAPACITY_AND_COST;
    const clean = outcomesOf([policy], [null, now], 'c', () => now);
    expect(clean[0]).toMatchObject({ allowed: true, remaining: 3 });
    /** The script's reply to a request of cost 2 on the test clock, the key holding `value`. */
    const spendTwo = async (value: string) => {
      await admin.set(key, value, 'PX', 60_000);
      const args = [`c${now}`, code, 5, 60_000, 5, 2];
      return (await admin.eval(CONSUME_SCRIPT, 1, key, ...args)) as ScriptReply;
    };
    for (const junk of [`${index}:4: 0`, `${index}:1e1:0`, ` ${index}:4:0`, `${index}:-4:0`]) {
      const reply = await spendTwo(junk);
      expect(await admin.get(key)).toBe(`${index}:2:0`);
      expect(outcomesOf([policy], reply, 'c', () => now)).toEqual(clean);
      // Nor does the refund script give back to it (it read "1e1" as 10 and wrote "<i>:9:0",
      // and failed on "<i>:3:x").
      await admin.set(key, junk, 'PX', 60_000);
      const refund = [String(now), ALGORITHM_CODES['sliding-window'], 5, 60_000, 1, index];
      expect(await admin.eval(REFUND_SCRIPT, 1, key, ...refund)).toBe(0);
      expect(await admin.get(key)).toBe(junk);
    }
    await admin.set(key, `${index}:3:x`, 'PX', 60_000);
    const refundArgs = [String(now), ALGORITHM_CODES['sliding-window'], 5, 60_000, 1, index];
    expect(await admin.eval(REFUND_SCRIPT, 1, key, ...refundArgs)).toBe(0);
    // A count past 2^53 (a value we never write) is one to both: refused, nothing written
    // (the decoder dropped it as no state, and reported the refused request admitted), with
    // a finite wait (400 digits, infinite as a double, gave a wait of NaN).
    for (const huge of [
      `${index}:9007199254740993:0`,
      `${index}:${'9'.repeat(400)}:0`,
      `${index}:0:${'9'.repeat(400)}`,
      `${index - 1}:${'9'.repeat(400)}:0`,
    ]) {
      const reply = await spendTwo(huge);
      expect(await admin.get(key)).toBe(huge);
      const [outcome] = outcomesOf([policy], reply, 'c', () => now);
      expect(outcome).toMatchObject({ allowed: false, remaining: 0 });
      expect(Number.isFinite(outcome!.retryAfterMs)).toBe(true);
      expect(Number.isFinite(outcome!.resetMs)).toBe(true);
    }
    await admin.del(key);
  });

  it('an event-loop stall longer than timeoutMs does not fail a call whose reply has arrived', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore({ client }),
      prefix: 'stall',
      timeoutMs: 50,
    });
    await limiter.peek('s', { rate: '10/h' }); // the script is loaded
    const pending = limiter.consume('s', { rate: '10/h' });
    // Block this process for 4 × timeoutMs: the reply lands in the socket meanwhile, and the
    // timer is due before it is read.
    const until = Date.now() + 200;
    while (Date.now() < until);
    const decision = await pending;
    expect(decision.policies[0]!.remaining).toBe(9);
  });

  it('sends EVAL only on NOSCRIPT: a script error is not retried', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore({ client }),
      prefix: 'wrongtype',
      timeoutMs: 5000,
    });
    const policy = { rate: '10/h', algorithm: 'sliding-window' } as const;
    await limiter.consume('warm', policy);
    // A key of the wrong type makes the script's GET fail after EVALSHA found it.
    await admin.hset('wrongtype:{x}:::swc', 'a', '1');
    await admin.config('RESETSTAT');
    await expect(limiter.consume('x', policy)).rejects.toMatchObject({ kind: 'error' });
    expect([await calls(admin, 'evalsha'), await calls(admin, 'eval')]).toEqual([1, 0]);
  });

  it('reset finds the keys of a client with its own keyPrefix', async () => {
    const prefixed = new Redis(server.url, {
      keyPrefix: 'app:',
      autoResendUnfulfilledCommands: false,
    });
    const limiter = new RateLimiter({
      store: new RedisStore({ client: prefixed }),
      prefix: 'kp',
      timeoutMs: 5000,
    });
    await limiter.consume('u1', { rate: '2/h' }, { cost: 2 });
    expect(await admin.exists('app:kp:{u1}:::tb')).toBe(1);
    expect(await limiter.reset('u1')).toBe(1);
    expect((await limiter.peek('u1', { rate: '2/h' })).policies[0]!.remaining).toBe(2);
    prefixed.disconnect();
  });
});

describe('replaySettings: clients that could count one request twice', () => {
  it('names what to change on a default standalone or Cluster client, and nothing on a tuned one', () => {
    const options = { lazyConnect: true };
    const plain = new Redis(options);
    const tuned = new Redis({ ...options, autoResendUnfulfilledCommands: false });
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    const safeCluster = new Cluster([{ host: '127.0.0.1', port: 1 }], {
      lazyConnect: true,
      retryDelayOnFailover: 0,
      redisOptions: { autoResendUnfulfilledCommands: false },
    });
    expect(replaySettings(plain)).toEqual(['autoResendUnfulfilledCommands: false']);
    expect(replaySettings(tuned)).toEqual([]);
    expect(replaySettings(cluster)).toEqual([
      'retryDelayOnFailover: 0',
      'redisOptions.autoResendUnfulfilledCommands: false',
    ]);
    expect(replaySettings(safeCluster)).toEqual([]);
    for (const c of [plain, tuned, cluster, safeCluster]) c.disconnect();
  });
});

describe('NRL_UNSAFE_REDIS_CLIENT', () => {
  /**
   * The codes of the warnings `make` emits, taken rather than printed. (Jest's sandbox keeps
   * the `warning` event of the worker's process from the test: read them at the call.)
   */
  function warningsOf(make: () => void): string[] {
    const emit = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      make();
      return emit.mock.calls
        .map(([, options]) => (options as { code?: string } | undefined)?.code)
        .filter((code) => code === 'NRL_UNSAFE_REDIS_CLIENT') as string[];
    } finally {
      emit.mockRestore();
    }
  }

  it('is emitted once per re-sending client, and not for one whose store sets acceptReplays', () => {
    const warned = new Redis({ lazyConnect: true });
    const accepted = new Redis({ lazyConnect: true });
    try {
      const twice = () => [
        new RedisStore({ client: warned, controlRefreshMs: false }),
        new RedisStore({ client: warned, controlRefreshMs: false }),
      ];
      expect(warningsOf(twice)).toEqual(['NRL_UNSAFE_REDIS_CLIENT']);
      const acknowledged = () =>
        new RedisStore({ client: accepted, controlRefreshMs: false, acceptReplays: true });
      expect(warningsOf(acknowledged)).toEqual([]);
    } finally {
      warned.disconnect();
      accepted.disconnect();
    }
  });
});
