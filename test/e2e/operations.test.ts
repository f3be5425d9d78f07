/**
 * The kill switch and the deny cache through the Nest module (issue 7), on a private Redis
 * whose command counts are this suite's alone.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimit, RateLimitService } from '../../lib/index.js';
import { commandCalls, startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import { CapturingLogger, createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

@Controller('ops')
class OpsController {
  @Get()
  @RateLimit('5/m')
  five() {
    return 'ok';
  }
}

let server: RedisServerHandle;
let admin: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
});
afterAll(async () => {
  admin.disconnect();
  await server.stop();
});

const evalshaCalls = async () => (await commandCalls(admin)).evalsha ?? 0;

describe.each(PLATFORMS)('operations on %s', (platform) => {
  const apps: AppHandle[] = [];
  const logger = new CapturingLogger();
  const start = async (options: Parameters<typeof createApp>[1]) => {
    const h = await createApp(platform, { redis: server.url, ...options }, [OpsController], {
      logger,
    });
    apps.push(h);
    return h;
  };
  beforeEach(() => admin.config('RESETSTAT'));
  afterAll(() => Promise.all(apps.map((h) => h.close())));

  it('enabled: false refuses nobody, sends no rate-limit headers and makes no Redis call', async () => {
    const h = await start({ enabled: false });
    const replies = await times(20, () => h.get('/ops'));
    expect(replies.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(replies.every((r) => Object.keys(r.rl).length === 0)).toBe(true);
    expect(await evalshaCalls()).toBe(0);
  });

  it('enabled as a function is asked on every request: switched off, then on again', async () => {
    let on = false;
    const h = await start({ enabled: () => on });
    expect((await times(8, () => h.get('/ops'))).map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(await evalshaCalls()).toBe(0);
    on = true;
    const statuses = (await times(7, () => h.get('/ops'))).map((r) => r.status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
  });

  it('an enabled function that never answers does not stall requests', async () => {
    let calls = 0;
    const h = await start({
      enabled: () => {
        calls++;
        return new Promise<boolean>(() => {});
      },
    });
    const began = Date.now();
    const statuses = (await times(7, () => h.get('/ops'))).map((r) => r.status);
    // The last answer stands (none yet: on), after at most 100 ms per request; a stalled
    // request would not answer at all. Generous for a loaded machine: under a second each.
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect(Date.now() - began).toBeLessThan(7 * 1000);
    // Asked once: while that answer is pending, requests take the last one at once.
    expect(calls).toBe(1);
  });

  it('with the deny cache, a refused client is answered from memory with an honest Retry-After', async () => {
    const h = await start({ denyCache: { maxAgeMs: 60_000 } });
    const replies = await times(30, () => h.get('/ops'));
    expect(replies.map((r) => r.status)).toEqual([...Array(5).fill(200), ...Array(25).fill(429)]);
    for (const r of replies.slice(5)) {
      const retryAfter = Number(r.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(11);
      expect(retryAfter).toBeLessThanOrEqual(12);
    }
    // 5 admitted and the first refusal reached Redis; the other 24 did not.
    expect(await evalshaCalls()).toBe(6);
  });

  it('shadow mode counts every would-be denial in Redis, deny cache or not', async () => {
    const h = await start({ mode: 'shadow', denyCache: { maxAgeMs: 60_000 } });
    const replies = await times(12, () => h.get('/ops'));
    expect(replies.map((r) => r.status)).toEqual(Array(12).fill(200));
    expect(await evalshaCalls()).toBe(12);
  });

  it('an override takes effect on the next request and is logged (at most once per 10 s)', async () => {
    const h = await start({});
    expect((await times(6, () => h.get('/ops'))).map((r) => r.status)).toContain(429);
    await h.app.get(RateLimitService).setOverride('ip:127.0.0.1', '*', '50/m', {
      ttlMs: 60_000,
      reason: 'ticket 9',
    });
    const replies = await times(3, () => h.get('/ops'));
    expect(replies.map((r) => [r.status, r.rl['x-ratelimit-limit']])).toEqual([
      [200, '50'],
      [200, '50'],
      [200, '50'],
    ]);
    const applied = logger.matching('rate_limit.override_applied');
    expect(applied).toHaveLength(1);
    expect(applied[0]).toContain('"policy":"default","rate":"50/m"');
  });
});
