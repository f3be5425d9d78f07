import { afterEach, describe, expect, it, jest } from '@jest/globals';
import {
  MemoryStore,
  RateLimitConfigError,
  RateLimiter,
  type MemoryStoreOptions,
} from '../../lib/index.js';
import { policyKey } from '../../lib/core/model/store-keys.js';

const START = 1_000_000;

/** A store on a clock the test moves, with no sweep timer. */
function setup(options: MemoryStoreOptions = {}) {
  let now = START;
  const store = new MemoryStore({ clock: () => now, sweepIntervalMs: 0, ...options });
  const limiter = new RateLimiter({ store });
  return {
    store,
    limiter,
    advance(ms: number) {
      now += ms;
    },
  };
}

/** Key of a fixed-window `default` policy in the `global` scope. */
function fwKey(identity: string): string {
  return policyKey('rl', identity, 'global', 'default', 'fwc');
}

const stores: MemoryStore[] = [];
afterEach(async () => {
  jest.restoreAllMocks();
  jest.useRealTimers();
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

describe('MemoryStore: maxKeys', () => {
  it('keeps at most maxKeys keys, dropping the least recently written', async () => {
    const { store, limiter } = setup({ maxKeys: 3 });
    const policy = { rate: '10/m', algorithm: 'fixed-window' } as const;
    for (const id of ['user:1', 'user:2', 'user:3']) await limiter.consume(id, policy);
    expect(store.size).toBe(3);

    await limiter.consume('user:4', policy);
    expect(store.size).toBe(3);
    expect(store.pttl(fwKey('user:1'))).toBe(-2);
    expect(store.pttl(fwKey('user:2'))).toBe(60_000);
    expect(store.pttl(fwKey('user:3'))).toBe(60_000);
    expect(store.pttl(fwKey('user:4'))).toBe(60_000);
  });

  it('counts a rewrite as the most recent write', async () => {
    const { store, limiter } = setup({ maxKeys: 3 });
    const policy = { rate: '10/m', algorithm: 'fixed-window' } as const;
    for (const id of ['user:1', 'user:2', 'user:3', 'user:1', 'user:4']) {
      await limiter.consume(id, policy);
    }
    expect(store.size).toBe(3);
    expect(store.pttl(fwKey('user:2'))).toBe(-2);
    expect(store.pttl(fwKey('user:1'))).toBe(60_000);
    // user:1 kept its count: 2 spent of 10.
    expect((await limiter.peek('user:1', policy)).policies[0]!.remaining).toBe(8);
    // user:2 was forgotten: a full budget again.
    expect((await limiter.peek('user:2', policy)).policies[0]!.remaining).toBe(10);
  });

  it('does not count a denied request or a peek as a write', async () => {
    const { store, limiter } = setup({ maxKeys: 3 });
    const policy = { rate: '1/m', algorithm: 'fixed-window' } as const;
    for (const id of ['user:1', 'user:2', 'user:3']) await limiter.consume(id, policy);
    expect((await limiter.consume('user:1', policy)).allowed).toBe(false);
    await limiter.peek('user:1', policy);
    await limiter.consume('user:4', policy);
    expect(store.size).toBe(3);
    expect(store.pttl(fwKey('user:1'))).toBe(-2);
    expect(store.pttl(fwKey('user:2'))).toBe(60_000);
  });
});

describe('MemoryStore: sweep', () => {
  it('drops exactly the expired keys', async () => {
    const { store, limiter, advance } = setup();
    await limiter.consume('user:a', { rate: '5/1s', algorithm: 'fixed-window' });
    await limiter.consume('user:b', { rate: '5/2s', algorithm: 'fixed-window' });
    await limiter.consume('user:c', { rate: '5/3s', algorithm: 'fixed-window' });
    await limiter.consume('user:d', { rate: '10/s' }); // token-bucket: full again after 100 ms
    expect(store.size).toBe(4);
    expect(store.pttl(fwKey('user:a'))).toBe(1000);
    expect(store.pttl(policyKey('rl', 'user:d', 'global', 'default', 'tb'))).toBe(100);

    advance(1000);
    // Expired keys are still held until swept (or read).
    expect(store.size).toBe(4);
    expect(store.sweep()).toBe(2);
    expect(store.size).toBe(2);
    expect(store.pttl(fwKey('user:a'))).toBe(-2);
    expect(store.pttl(fwKey('user:b'))).toBe(1000);
    expect(store.pttl(fwKey('user:c'))).toBe(2000);

    advance(999);
    expect(store.sweep()).toBe(0);
    expect(store.size).toBe(2);
    expect(store.pttl(fwKey('user:b'))).toBe(1);

    advance(1);
    expect(store.sweep()).toBe(1);
    expect(store.size).toBe(1);
    expect(store.pttl(fwKey('user:c'))).toBe(1000);
  });

  it('with sweepBatch 2 checks at most 2 keys per call and continues where it stopped', async () => {
    const { store, limiter, advance } = setup({ sweepBatch: 2 });
    // Written in this order: two long-lived keys, then three short-lived ones.
    await limiter.consume('user:1', { rate: '5/10s', algorithm: 'fixed-window' });
    await limiter.consume('user:2', { rate: '5/10s', algorithm: 'fixed-window' });
    await limiter.consume('user:3', { rate: '5/1s', algorithm: 'fixed-window' });
    await limiter.consume('user:4', { rate: '5/1s', algorithm: 'fixed-window' });
    await limiter.consume('user:5', { rate: '5/1s', algorithm: 'fixed-window' });
    advance(1000);

    expect(store.sweep()).toBe(0); // checked user:1, user:2: alive
    expect(store.size).toBe(5);
    expect(store.sweep()).toBe(2); // checked user:3, user:4
    expect(store.size).toBe(3);
    expect(store.pttl(fwKey('user:5'))).toBe(-2);
    expect(store.sweep()).toBe(1); // checked user:5, then reached the end
    expect(store.size).toBe(2);
    expect(store.pttl(fwKey('user:1'))).toBe(9000);
    expect(store.pttl(fwKey('user:2'))).toBe(9000);

    advance(9000);
    expect(store.sweep()).toBe(2); // starts over from the first key
    expect(store.size).toBe(0);
  });

  it('drops an expired key when it is read', async () => {
    const { store, limiter, advance } = setup();
    const policy = { rate: '5/1s', algorithm: 'fixed-window' } as const;
    await limiter.consume('user:a', policy);
    await limiter.consume('user:b', policy);
    advance(1000);
    expect(store.size).toBe(2);
    const decision = await limiter.peek('user:a', policy);
    expect(decision.policies[0]!.remaining).toBe(5);
    expect(store.size).toBe(1);
  });
});

describe('MemoryStore: options', () => {
  it.each([
    ['maxKeys', 0],
    ['maxKeys', -1],
    ['maxKeys', 1.5],
    ['sweepBatch', -1],
    ['sweepBatch', 0],
    ['sweepBatch', NaN],
    ['sweepIntervalMs', -5],
    ['sweepIntervalMs', NaN],
  ])('rejects %s %p with ERR_RATE_LIMIT_STORE_OPTION', (name, value) => {
    let error: unknown;
    try {
      stores.push(new MemoryStore({ sweepIntervalMs: 0, [name]: value }));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RateLimitConfigError);
    const e = error as RateLimitConfigError;
    expect(e.code).toBe('ERR_RATE_LIMIT_STORE_OPTION');
    expect(e.message).toBe(
      `invalid MemoryStore option ${name}: ${String(value)} (in MemoryStore) [ERR_RATE_LIMIT_STORE_OPTION]` +
        ` (see docs/reference/errors.md#err_rate_limit_store_option in the nest-rate-limit package)`,
    );
  });

  it('sweeps on its own timer every sweepIntervalMs', async () => {
    jest.useFakeTimers({ now: START });
    const sweep = jest.spyOn(MemoryStore.prototype, 'sweep');
    const store = new MemoryStore({ sweepIntervalMs: 1000 });
    stores.push(store);
    const limiter = new RateLimiter({ store, timeoutMs: Infinity });
    await limiter.consume('user:a', { rate: '5/1s', algorithm: 'fixed-window' });
    expect(store.size).toBe(1);
    jest.advanceTimersByTime(999);
    expect(sweep).toHaveBeenCalledTimes(0);
    jest.advanceTimersByTime(1);
    expect(sweep).toHaveBeenCalledTimes(1);
    expect(store.size).toBe(0);
    jest.advanceTimersByTime(2000);
    expect(sweep).toHaveBeenCalledTimes(3);
    await store.close();
    jest.advanceTimersByTime(5000);
    expect(sweep).toHaveBeenCalledTimes(3);
  });

  // Timers clamp a delay above 2^31 - 1 ms (about 24.8 days), and Infinity, to 1 ms, so
  // such an interval would sweep every millisecond: it is refused instead.
  it.each([Infinity, 2 ** 31])(
    'refuses sweepIntervalMs %p, which a timer would run every millisecond',
    (every) => {
      expect(() => new MemoryStore({ sweepIntervalMs: every })).toThrow(
        expect.objectContaining({ code: 'ERR_RATE_LIMIT_STORE_OPTION' }),
      );
    },
  );
});

describe('MemoryStore: close', () => {
  it('empties the store', async () => {
    const { store, limiter } = setup();
    await limiter.consume('user:a', { rate: '5/1s' });
    await limiter.consume('user:b', { rate: '5/1s' });
    expect(store.size).toBe(2);
    await store.close();
    expect(store.size).toBe(0);
    expect(store.pttl(policyKey('rl', 'user:a', 'global', 'default', 'tb'))).toBe(-2);
  });
});

describe('MemoryStore: when full', () => {
  it('drops an expired key before a live one (maxKeys 2: a spent 3/d victim keeps its spending)', async () => {
    let now = 1_000_000;
    const store = new MemoryStore({ clock: () => now, maxKeys: 2, sweepIntervalMs: 0 });
    const limiter = new RateLimiter({ store });
    await limiter.consume('victim', { rate: '3/d' }, { cost: 3 });
    await limiter.consume('brief', { rate: '1/s' });
    now += 2000; // 'brief' has expired, 'victim' has not
    await limiter.consume('newcomer', { rate: '1/s' });
    expect(store.size).toBe(2);
    expect((await limiter.peek('victim', { rate: '3/d' })).policies[0]!.remaining).toBe(0);
    await store.close();
  });
});
