import { afterEach, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { freePort } from '../harness/global-setup.js';
import {
  definePolicy,
  MemoryStore,
  RateLimitBackendError,
  RateLimitConfigError,
  RateLimiter,
  RedisStore,
  type RateLimiterOptions,
  type RateLimitStore,
  type StoreOutcome,
} from '../../lib/index.js';
import { policyKey } from '../../lib/core/model/store-keys.js';

const NOW = 1_000_000;
const stores: MemoryStore[] = [];

function memoryStore(): MemoryStore {
  const store = new MemoryStore({ clock: () => NOW, sweepIntervalMs: 0 });
  stores.push(store);
  return store;
}

afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

function construct(options: Partial<RateLimiterOptions>): RateLimitConfigError {
  try {
    new RateLimiter({ store: memoryStore(), ...options } as RateLimiterOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitConfigError);
    return error as RateLimitConfigError;
  }
  throw new Error('expected the constructor to throw');
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

/** A store whose consume and deleteByPrefix fail with `error` (as a rejected promise). */
function failingStore(error: unknown): RateLimitStore {
  return {
    consume: () => Promise.reject(error),
    deleteByPrefix: () => Promise.reject(error),
  };
}

const TEN_PER_MINUTE = { rate: '10/m' } as const;

describe('RateLimiter: constructor', () => {
  it('defaults prefix to rl and timeoutMs to 100', () => {
    const limiter = new RateLimiter({ store: memoryStore() });
    expect(limiter.prefix).toBe('rl');
    expect(limiter.timeoutMs).toBe(100);
  });

  it.each(['', 'a b', 'a{b', 'a}b', 'x'.repeat(65)])(
    'rejects the prefix %p with ERR_RATE_LIMIT_OPTION',
    (prefix) => {
      const error = construct({ prefix });
      expect(error.code).toBe('ERR_RATE_LIMIT_OPTION');
      expect(error.message).toContain(`invalid prefix ${JSON.stringify(prefix)}`);
      expect(error.message).toContain('(in RateLimiter)');
    },
  );

  it.each([
    [0, '0'],
    [-1, '-1'],
    [NaN, 'NaN'],
    ['100', '"100"'],
    // A timer would fire after 1 ms instead: every call would time out.
    [3e9, '3000000000'],
  ])('rejects timeoutMs %p with ERR_RATE_LIMIT_OPTION', (timeoutMs, quoted) => {
    const error = construct({ timeoutMs: timeoutMs as number });
    expect(error.code).toBe('ERR_RATE_LIMIT_OPTION');
    expect(error.message).toContain(`invalid timeoutMs ${quoted}`);
  });

  it('rejects a missing store with ERR_RATE_LIMIT_OPTION', () => {
    const error = construct({ store: undefined });
    expect(error.code).toBe('ERR_RATE_LIMIT_OPTION');
    expect(error.message).toContain('needs a store');
  });

  it('accepts a prefix with colons and timeoutMs Infinity', () => {
    const limiter = new RateLimiter({
      store: memoryStore(),
      prefix: 'app:rl',
      timeoutMs: Infinity,
    });
    expect(limiter.prefix).toBe('app:rl');
    expect(limiter.timeoutMs).toBe(Infinity);
  });
});

describe('RateLimiter.consume: argument validation', () => {
  function setup() {
    const store = memoryStore();
    const limiter = new RateLimiter({ store, timeoutMs: 1000 });
    return { store, limiter };
  }

  async function expectUntouched(limiter: RateLimiter, store: MemoryStore): Promise<void> {
    expect(store.size).toBe(0);
    const peek = await limiter.peek('user:42', TEN_PER_MINUTE);
    expect(peek.allowed).toBe(true);
    expect(peek.policies[0]!.remaining).toBe(10);
    expect(peek.policies[0]!.resetMs).toBe(0);
  }

  it.each([42, null, undefined, { id: 42 }])(
    'rejects the non-string identity %p with a TypeError and writes nothing',
    async (identity) => {
      const { store, limiter } = setup();
      const error = await rejection(limiter.consume(identity as unknown as string, TEN_PER_MINUTE));
      expect(error).toBeInstanceOf(TypeError);
      expect(error).toMatchObject({ code: 'ERR_RATE_LIMIT_IDENTITY' });
      expect((error as Error).message).toContain('rate-limit identity must be a string');
      expect((error as Error).message).toMatch(
        / \[ERR_RATE_LIMIT_IDENTITY\] \(see docs\/reference\/errors\.md#err_rate_limit_identity in the nest-rate-limit package\)$/,
      );
      await expectUntouched(limiter, store);
    },
  );

  it.each([
    [-1, '-1'],
    [1.5, '1.5'],
    [NaN, 'NaN'],
  ])('rejects cost %p with ERR_RATE_LIMIT_COST and writes nothing', async (cost, quoted) => {
    const { store, limiter } = setup();
    const error = await rejection(limiter.consume('user:42', TEN_PER_MINUTE, { cost }));
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect((error as RateLimitConfigError).code).toBe('ERR_RATE_LIMIT_COST');
    expect((error as Error).message).toContain(`invalid cost ${quoted}`);
    await expectUntouched(limiter, store);
  });

  it('rejects a bad call scope with ERR_RATE_LIMIT_SCOPE and writes nothing', async () => {
    const { store, limiter } = setup();
    const error = await rejection(limiter.consume('user:42', TEN_PER_MINUTE, { scope: 'a:b' }));
    expect((error as RateLimitConfigError).code).toBe('ERR_RATE_LIMIT_SCOPE');
    await expectUntouched(limiter, store);
  });

  it('rejects an invalid policy input with its config error and writes nothing', async () => {
    const { store, limiter } = setup();
    const error = await rejection(
      limiter.consume('user:42', [TEN_PER_MINUTE, { name: 'daily', rate: '0/d' }]),
    );
    expect((error as RateLimitConfigError).code).toBe('ERR_RATE_LIMIT_RATE');
    await expectUntouched(limiter, store);
  });

  it('rejects two policies with the same name and scope and writes nothing', async () => {
    const { store, limiter } = setup();
    const error = await rejection(
      limiter.consume('user:42', [
        { name: 'burst', rate: '10/m' },
        { name: 'burst', rate: '100/h' },
      ]),
    );
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect((error as RateLimitConfigError).code).toBe('ERR_RATE_LIMIT_DUPLICATE_POLICY');
    expect((error as Error).message).toContain('two policies named "burst" in scope "global"');
    expect(store.size).toBe(0);
    const peek = await limiter.peek('user:42', { name: 'burst', rate: '10/m' });
    expect(peek.policies[0]!.remaining).toBe(10);
  });

  it('rejects a duplicate where one policy names the call scope explicitly', async () => {
    const { store, limiter } = setup();
    const error = await rejection(
      limiter.consume(
        'user:42',
        [
          { name: 'daily', rate: '10/m' },
          { name: 'daily', rate: '100/h', scope: 'auth' },
        ],
        { scope: 'auth' },
      ),
    );
    expect((error as RateLimitConfigError).code).toBe('ERR_RATE_LIMIT_DUPLICATE_POLICY');
    expect(store.size).toBe(0);
  });

  // Bug: the duplicate check compares full keys, which end with the algorithm's tag, so two
  // policies with the same name and scope but different algorithms are not caught (DESIGN §3
  // and the consume() docs say same scope + name is an error). Both then count separately.
  it('rejects two policies with the same name and scope but different algorithms', async () => {
    const { store, limiter } = setup();
    const error = await rejection(
      limiter.consume('user:42', [
        { name: 'burst', rate: '10/m' },
        { name: 'burst', rate: '10/m', algorithm: 'gcra' },
      ]),
    );
    expect((error as RateLimitConfigError).code).toBe('ERR_RATE_LIMIT_DUPLICATE_POLICY');
    expect(store.size).toBe(0);
  });

  it('accepts two policies with the same name in different scopes, each with its own key', async () => {
    const { store, limiter } = setup();
    const decision = await limiter.consume('user:42', [
      { name: 'burst', rate: '10/m', scope: 'auth' },
      { name: 'burst', rate: '5/m', scope: 'api/v1' },
    ]);
    expect(decision.allowed).toBe(true);
    expect(decision.policies.map((p) => [p.name, p.limit, p.remaining])).toEqual([
      ['burst', 10, 9],
      ['burst', 5, 4],
    ]);
    expect(store.size).toBe(2);
    expect(store.pttl(policyKey('rl', 'user:42', 'auth', 'burst', 'tb'))).toBe(6000);
    expect(store.pttl(policyKey('rl', 'user:42', 'api/v1', 'burst', 'tb'))).toBe(12_000);
  });

  it('accepts a validated policy and an input with the same name in different scopes', async () => {
    const { limiter } = setup();
    const policy = definePolicy({ name: 'daily', rate: '3/d', scope: 'auth' });
    const decision = await limiter.consume('user:42', [policy, { name: 'daily', rate: '3/d' }]);
    expect(decision.policies.map((p) => p.remaining)).toEqual([2, 2]);
  });
});

describe('RateLimiter: backend failures', () => {
  it('turns a store error into RateLimitBackendError of kind unavailable', async () => {
    const cause = new Error('connect ECONNREFUSED 127.0.0.1:6379');
    const limiter = new RateLimiter({ store: failingStore(cause) });
    const error = await rejection(limiter.consume('user:42', TEN_PER_MINUTE));
    expect(error).toBeInstanceOf(RateLimitBackendError);
    const e = error as RateLimitBackendError;
    expect(e.kind).toBe('unavailable');
    expect(e.name).toBe('RateLimitBackendError');
    expect(e.message).toBe('rate-limit store failed: connect ECONNREFUSED 127.0.0.1:6379');
    expect(e.cause).toBe(cause);
  });

  it('names an ioredis client that is not connected "unreachable", not its offline-queue advice', async () => {
    // A real client, set up as the module sets its own, with nothing listening on its port.
    const client = new Redis({
      port: await freePort(),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
    });
    try {
      const limiter = new RateLimiter({ store: new RedisStore({ client }) });
      const error = (await rejection(
        limiter.consume('user:42', TEN_PER_MINUTE),
      )) as RateLimitBackendError;
      expect(error.kind).toBe('unavailable');
      // Its first connection fails: the call is never handed to the client (issue 22, finding 11).
      expect(error.message).toBe(
        'rate-limit store unreachable: not connected to Redis (its first connection failed)',
      );
      // Once it is reconnecting, at once, without waiting for it.
      const again = (await rejection(
        limiter.consume('user:42', TEN_PER_MINUTE),
      )) as RateLimitBackendError;
      expect(again.message).toBe(
        `rate-limit store unreachable: not connected to Redis (client ${client.status})`,
      );
    } finally {
      client.disconnect();
    }
  });

  it('turns a ReplyError into RateLimitBackendError of kind error', async () => {
    const cause = new Error('NOSCRIPT No matching script');
    cause.name = 'ReplyError';
    const limiter = new RateLimiter({ store: failingStore(cause) });
    const error = await rejection(limiter.consume('user:42', TEN_PER_MINUTE));
    expect(error).toBeInstanceOf(RateLimitBackendError);
    expect((error as RateLimitBackendError).kind).toBe('error');
    expect((error as RateLimitBackendError).cause).toBe(cause);
  });

  it('turns a non-Error rejection into kind unavailable', async () => {
    const limiter = new RateLimiter({ store: failingStore('boom') });
    const error = (await rejection(
      limiter.consume('user:42', TEN_PER_MINUTE),
    )) as RateLimitBackendError;
    expect(error).toBeInstanceOf(RateLimitBackendError);
    expect(error.kind).toBe('unavailable');
    expect(error.message).toBe('rate-limit store failed: boom');
  });

  it('passes a RateLimitBackendError from the store through unchanged', async () => {
    const cause = new RateLimitBackendError('timeout', 'inner');
    const limiter = new RateLimiter({ store: failingStore(cause) });
    expect(await rejection(limiter.consume('user:42', TEN_PER_MINUTE))).toBe(cause);
  });

  it('turns a failing deleteByPrefix in reset into kind unavailable', async () => {
    const limiter = new RateLimiter({ store: failingStore(new Error('down')) });
    const error = (await rejection(limiter.reset('user:42'))) as RateLimitBackendError;
    expect(error).toBeInstanceOf(RateLimitBackendError);
    expect(error.kind).toBe('unavailable');
  });

  // Bug: guard() wraps the promise the store returns, but a store whose consume throws
  // synchronously (a non-async implementation, or a client that throws before returning a
  // promise) escapes it, so the caller gets the raw Error, not a RateLimitBackendError,
  // and fail-open / fail-closed handling keyed on RateLimitBackendError never runs.
  it('turns a store that throws synchronously into RateLimitBackendError', async () => {
    const store: RateLimitStore = {
      consume: () => {
        throw new Error('client is closed');
      },
      deleteByPrefix: () => Promise.resolve(0),
    };
    const limiter = new RateLimiter({ store });
    const error = await rejection(limiter.consume('user:42', TEN_PER_MINUTE));
    expect(error).toBeInstanceOf(RateLimitBackendError);
    expect((error as RateLimitBackendError).kind).toBe('unavailable');
  });

  it('rejects a maxWaitMs below timeoutMs, or not a number (ERR_RATE_LIMIT_OPTION)', () => {
    const store: RateLimitStore = {
      consume: () => new Promise<StoreOutcome[]>(() => {}),
      deleteByPrefix: () => Promise.resolve(0),
    };
    for (const maxWaitMs of [50, Number.NaN, '1000' as unknown as number]) {
      expect(() => new RateLimiter({ store, timeoutMs: 100, maxWaitMs })).toThrow(
        expect.objectContaining({ code: 'ERR_RATE_LIMIT_OPTION' }),
      );
    }
    expect(() => new RateLimiter({ store, timeoutMs: 100, maxWaitMs: Infinity })).not.toThrow();
  });

  it('rejects with kind timeout when the store never answers within timeoutMs', async () => {
    const store: RateLimitStore = {
      consume: () => new Promise<StoreOutcome[]>(() => {}),
      deleteByPrefix: () => new Promise<number>(() => {}),
    };
    const limiter = new RateLimiter({ store, timeoutMs: 20 });
    const started = Date.now();
    const error = await rejection(limiter.consume('user:42', TEN_PER_MINUTE));
    expect(Date.now() - started).toBeGreaterThanOrEqual(15);
    expect(error).toBeInstanceOf(RateLimitBackendError);
    expect((error as RateLimitBackendError).kind).toBe('timeout');
    // A loaded machine may run the timer late: the call then gets a moment more, said so.
    expect((error as Error).message).toMatch(/^rate-limit store did not answer within 20 ms/);
  });

  it('opens the circuit after 5 failures in a row, and reset still reaches the store', async () => {
    const stackTraceLimit = Error.stackTraceLimit;
    let calls = 0;
    const store: RateLimitStore = {
      consume: () => {
        calls++;
        return Promise.reject(new Error('down'));
      },
      deleteByPrefix: () => Promise.resolve(0),
    };
    const limiter = new RateLimiter({
      store,
      circuitBreaker: { failureThreshold: 5, cooldownMs: 60_000 },
    });
    for (let i = 0; i < 5; i++) await rejection(limiter.consume('user:42', TEN_PER_MINUTE));
    expect(limiter.circuitState).toBe('open');
    const skipped = (await rejection(
      limiter.consume('user:42', TEN_PER_MINUTE),
    )) as RateLimitBackendError;
    expect(skipped.message).toBe('rate-limit store skipped: circuit breaker open');
    // Every request of an outage takes this path: no stack trace is captured for it (it cost
    // 8 to 21 µs of CPU per HTTP request), and the process's own limit is left as it was.
    expect(skipped.stack).toBe(
      'RateLimitBackendError: rate-limit store skipped: circuit breaker open',
    );
    expect(Error.stackTraceLimit).toBe(stackTraceLimit);
    expect(calls).toBe(5);
    // An operator's reset is not a request: it bypasses the breaker.
    expect(await limiter.reset('user:42')).toBe(0);
  });
});

describe('RateLimiter.reset', () => {
  it('returns how many keys it deleted, under every scope or under one', async () => {
    const store = memoryStore();
    const limiter = new RateLimiter({ store });
    await limiter.consume('user:42', [
      { name: 'burst', rate: '10/s' },
      { name: 'daily', rate: '1000/d' },
    ]);
    await limiter.consume('user:42', { rate: '5/m' }, { scope: 'auth' });
    await limiter.consume('user:4', { rate: '5/m' });
    expect(store.size).toBe(4);

    expect(await limiter.reset('user:42', 'auth')).toBe(1);
    expect(store.size).toBe(3);
    expect(await limiter.reset('user:42')).toBe(2);
    expect(store.size).toBe(1);
    expect(await limiter.reset('user:42')).toBe(0);
    expect(await limiter.reset('user:4')).toBe(1);
    expect(store.size).toBe(0);
  });

  it('restores the full budget', async () => {
    const store = memoryStore();
    const limiter = new RateLimiter({ store });
    await limiter.consume('user:42', TEN_PER_MINUTE, { cost: 7 });
    expect((await limiter.peek('user:42', TEN_PER_MINUTE)).policies[0]!.remaining).toBe(3);
    expect(await limiter.reset('user:42')).toBe(1);
    expect((await limiter.peek('user:42', TEN_PER_MINUTE)).policies[0]!.remaining).toBe(10);
  });

  it('rejects a bad scope with ERR_RATE_LIMIT_SCOPE', async () => {
    const limiter = new RateLimiter({ store: memoryStore() });
    const error = (await rejection(limiter.reset('user:42', 'a:b'))) as RateLimitConfigError;
    expect(error.code).toBe('ERR_RATE_LIMIT_SCOPE');
  });
});

describe('RateLimiter: a store without refund, release or inspect', () => {
  /** A store of one's own with only the two required methods, over a memory store. */
  function minimalLimiter(): RateLimiter {
    const memory = memoryStore();
    return new RateLimiter({
      store: {
        consume: (policies) => memory.consume(policies),
        deleteByPrefix: (prefix) => memory.deleteByPrefix(prefix),
      },
    });
  }

  // Each call returns a promise whatever happens: a caller's `.catch` sees every failure,
  // and nothing throws past it (as from a response's event).
  it.each([
    [
      'refund',
      'this rate-limit store cannot refund: implement RateLimitStore.refund (in RateLimiter.refund)',
      (l: RateLimiter) =>
        l.refund({
          refunds: [
            {
              index: 0,
              refund: {
                key: 'k',
                algorithm: 'fixed-window',
                limit: 1,
                periodMs: 1000,
                cost: 1,
                mark: NOW,
              },
            },
          ],
        }),
    ],
    [
      'release',
      'this rate-limit store cannot release concurrency slots: implement RateLimitStore.release (in RateLimiter.release)',
      (l: RateLimiter) => l.release([{ key: 'k', id: 'lease-1', leaseMs: 30_000 }]),
    ],
    [
      'inspect',
      'this rate-limit store cannot inspect: implement RateLimitStore.inspect (in RateLimiter.inspect)',
      (l: RateLimiter) => l.inspect('user:1'),
    ],
  ] as const)(
    '%s rejects with ERR_RATE_LIMIT_STORE_UNSUPPORTED, never throws',
    async (_, message, call) => {
      const limiter = minimalLimiter();
      let returned: Promise<unknown> | undefined;
      expect(() => {
        returned = call(limiter);
      }).not.toThrow();
      expect(returned).toBeInstanceOf(Promise);
      const error = (await rejection(returned!)) as RateLimitConfigError;
      expect(error).toBeInstanceOf(RateLimitConfigError);
      expect(error.code).toBe('ERR_RATE_LIMIT_STORE_UNSUPPORTED');
      expect(error.message.startsWith(message)).toBe(true);
      // Nothing kept to send again: such a store never will release.
      expect(limiter.releasesKept).toBe(0);
      limiter.close();
    },
  );
});
