import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import { RateLimiter, RedisStore } from '../../lib/index.js';
import { startRedisServer, type RedisServerHandle } from '../harness/redis.js';

// Issue 37: with default options an IPv4 identity's key was
// `rl:{ip:203.0.113.7}:global:default:tb`, 37 characters, which took 88 B of Redis memory
// where rate-limiter-flexible's takes 72 B (keys of up to 30 characters).
describe('Redis memory per identity, default options', () => {
  let server: RedisServerHandle;
  let admin: Redis;
  let client: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url);
    client = new Redis(server.url, { autoResendUnfulfilledCommands: false });
  });

  afterAll(async () => {
    admin.disconnect();
    client.disconnect();
    await server.stop();
  });

  /** `MEMORY USAGE` of every key on the server, summed, and the keys. */
  async function usage(): Promise<{ keys: string[]; bytes: number }> {
    const keys = (await admin.keys('*')).sort();
    let bytes = 0;
    for (const key of keys) bytes += (await admin.memory('USAGE', key, 'SAMPLES', 0)) ?? 0;
    return { keys, bytes };
  }

  it.each([
    ['token bucket (the default)', undefined, 'tb'],
    ['GCRA', 'gcra', 'gcra'],
  ] as const)(
    'an IPv4 client costs at most 72 bytes under %s, for its shortest and longest address',
    async (_label, algorithm, tag) => {
      const limiter = new RateLimiter({ store: new RedisStore({ client }) });
      for (const identity of ['ip:1.2.3.4', 'ip:203.0.113.7', 'ip:255.255.255.255']) {
        await admin.flushall();
        // 100/min: the debt after one request (600 ms) outlives the reads below.
        const decision = await limiter.consume(identity, { rate: '100/m', algorithm });
        expect(decision.allowed).toBe(true);
        const { keys, bytes } = await usage();
        expect(keys).toEqual([`rl:{${identity}}:::${tag}`]);
        expect(bytes).toBeLessThanOrEqual(72);
      }
    },
  );
});
