/**
 * Redis that answers but cannot write (issue 22, finding 7): out of memory under
 * `maxmemory-policy noeviction` (`-OOM`), then a read-only replica (`-READONLY`). Each
 * platform gets a private redis-server, filled past `maxmemory` (then made the replica of an
 * empty primary), and two apps on it sharing one prefix, with the module's default timeout
 * and circuit breaker.
 *
 * Before the fix: these replies counted against the circuit breaker, so a few fresh clients
 * (whose scripts fail at their first write) opened it and then every client was admitted
 * fail-open, one already refused included; and each reply the store did give (a refused
 * client's script writes nothing, so it runs) dropped the insurance limits' local counts,
 * so a client under `onStoreFailure: 'local'` was admitted again and again.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimit, RateLimiter } from '../../lib/index.js';
import { disconnect, startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import {
  createApp,
  PLATFORMS,
  pollUntil,
  uniquePrefix,
  type AppHandle,
  type Reply,
} from './support/app.js';

@Controller('cw')
class CannotWriteController {
  @Get('open')
  @RateLimit('3/m')
  open() {
    return 'open';
  }

  /** A penalty: a refusal starts a block, a refusal during it starts it again. */
  @Get('block')
  @RateLimit('3/m', { block: '1m', extendBlock: true })
  block() {
    return 'block';
  }

  /** Insurance limits: with `instances: 3`, this process's share of `3/m` is 1. */
  @Get('local')
  @RateLimit('3/m', { onStoreFailure: 'local' })
  local() {
    return 'local';
  }
}

const statusOf = (r: Reply) => `${r.status}${r.rl['x-ratelimit-limit'] ? '' : ' no headers'}`;

describe.each(PLATFORMS)('Redis that answers but cannot write, on %s', (platform) => {
  let server: RedisServerHandle;
  let primary: RedisServerHandle;
  let admin: Redis;
  /** Two instances sharing the store: the second never sees the first one's refusals. */
  let one: AppHandle;
  let two: AppHandle;
  const get = (h: AppHandle, path: string, user: string) => h.get(path, { 'x-user': user });
  /** Fresh clients on a fail-open route: their scripts fail at their first write. */
  const freshOnes = async (h: AppHandle, tag: string) => {
    const replies: Reply[] = [];
    for (let i = 0; i < 8; i++) replies.push(await get(h, '/cw/open', `${tag}-${i}`));
    return replies;
  };

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    const options = { redis: server.url, prefix: uniquePrefix(), timeoutMs: 100, instances: 3 };
    one = await createApp(platform, options, [CannotWriteController], { userFromHeader: true });
    two = await createApp(platform, options, [CannotWriteController], { userFromHeader: true });
  });
  afterAll(async () => {
    await one?.close();
    await two?.close();
    if (admin) disconnect(admin);
    await server?.kill();
    await primary?.kill();
  });

  it('while Redis can write: each client gets 3, then 429', async () => {
    for (const [h, user] of [
      [one, 'over'],
      [one, 'seen-by-one'],
    ] as const) {
      const replies = [];
      for (let i = 0; i < 4; i++) replies.push(statusOf(await get(h, '/cw/open', user)));
      expect(replies).toEqual(['200', '200', '200', '429']);
    }
    // One at the edge of a penalty: its next request is refused and starts the block.
    for (const user of ['to-block', 'blocked']) {
      const replies = [];
      for (let i = 0; i < 3; i++) replies.push(statusOf(await get(one, '/cw/block', user)));
      expect(replies).toEqual(['200', '200', '200']);
    }
    expect(statusOf(await get(one, '/cw/block', 'blocked'))).toBe('429');
  });

  it('out of memory (noeviction): fresh clients fail open, no 5xx; clients already refused stay refused, on either instance; insurance limits hold', async () => {
    // Filled past 1 MB first, then capped there: every write is refused from now on.
    for (let i = 0; i < 64; i++) await admin.set(`filler:${i}`, 'x'.repeat(64 * 1024));
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1mb');

    // Insurance, interleaved with answers the store does give (a refused client's script
    // writes nothing, so it runs): the local share of 1 is spent once, not after each answer.
    const insured: string[] = [];
    const refused: string[] = [];
    for (let i = 0; i < 4; i++) {
      insured.push(statusOf(await get(one, '/cw/local', 'insured')));
      refused.push(statusOf(await get(one, '/cw/open', 'over')));
    }
    expect(insured).toEqual(['200', '429', '429', '429']);
    expect(refused).toEqual(['429', '429', '429', '429']);
    // Review M1: a refusal that would start a block, or start it again, wrote the block in the
    // script, which failed as a whole under OOM: admitted fail-open. The refusal stands now
    // (on the instance that never saw either refusal too); only the block is not written.
    expect(statusOf(await get(two, '/cw/block', 'to-block'))).toBe('429');
    expect(statusOf(await get(two, '/cw/block', 'blocked'))).toBe('429');

    // Fresh clients on a fail-open route, enough to open a breaker that counted these replies.
    for (const h of [one, two]) {
      expect((await freshOnes(h, 'oom')).map(statusOf)).toEqual(
        new Array(8).fill('200 no headers'),
      );
    }
    // Still refused: by the store itself on both instances (the breaker stayed closed, so it
    // is still asked), which also refuses for the instance that never saw the refusal.
    expect(statusOf(await get(one, '/cw/open', 'over'))).toBe('429');
    expect(statusOf(await get(two, '/cw/open', 'seen-by-one'))).toBe('429');
    for (const h of [one, two]) expect(h.app.get(RateLimiter).circuitState).toBe('closed');
    await admin.config('SET', 'maxmemory', '0');
  });

  // Review: MISCONF and NOREPLICAS (writes refused for want of a snapshot or of replicas)
  // counted against the breaker like a dead store, so 5 fresh clients opened it and a client
  // refused only by the other instance was then admitted fail-open.
  it('too few replicas (min-replicas-to-write): fresh clients fail open, the breaker stays closed, refused clients stay refused on either instance', async () => {
    await admin.config('SET', 'min-replicas-to-write', '1');
    for (const h of [one, two]) {
      expect((await freshOnes(h, 'norepl')).map(statusOf)).toEqual(
        new Array(8).fill('200 no headers'),
      );
    }
    expect(statusOf(await get(two, '/cw/open', 'seen-by-one'))).toBe('429');
    expect(statusOf(await get(one, '/cw/open', 'over'))).toBe('429');
    for (const h of [one, two]) expect(h.app.get(RateLimiter).circuitState).toBe('closed');
    await admin.config('SET', 'min-replicas-to-write', '0');
  });

  it('a read-only replica: clients this instance saw refused stay refused; insurance limits hold; fresh clients fail open, no 5xx', async () => {
    // Made the replica of an empty primary: the rate-limit state it held is gone, so only
    // what the instance remembers can refuse.
    primary = await startRedisServer(['--repl-diskless-sync-delay', '0']);
    expect(await admin.call('REPLICAOF', '127.0.0.1', String(primary.port))).toBe('OK');
    const synced = await pollUntil(
      async () => /master_link_status:up/.test(await admin.info('replication')),
      10_000,
    );
    expect(synced).toBe(true);
    expect(await admin.dbsize()).toBe(0);

    expect(statusOf(await get(one, '/cw/open', 'over'))).toBe('429');
    expect(statusOf(await get(one, '/cw/open', 'seen-by-one'))).toBe('429');
    const insured: string[] = [];
    for (let i = 0; i < 3; i++) insured.push(statusOf(await get(one, '/cw/local', 'insured-ro')));
    expect(insured).toEqual(['200', '429', '429']);
    expect((await freshOnes(one, 'ro')).map(statusOf)).toEqual(new Array(8).fill('200 no headers'));
    // The local decision is shown as such: the share, with a wait.
    const local = await get(one, '/cw/local', 'insured-ro');
    expect(local.headers.get('x-ratelimit-limit')).toBe('1');
    expect(Number(local.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });
});
