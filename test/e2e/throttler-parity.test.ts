/**
 * The drop-in answers as @nestjs/throttler 6.7.1 does where a user function or a pattern is
 * involved, and keeps its own promises (fail-open, the window-end refusal, bounded memory)
 * for guards that count through the storage themselves. Each comparison runs the same code on
 * both throttlers, each in a process of its own (test/migration/throttler-parity-app.ts).
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  Controller,
  Get,
  Injectable,
  Module,
  type INestApplication,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  RateLimitRedisStorage,
  ThrottlerException,
  ThrottlerGuard,
  ThrottlerModule,
  ThrottlerStorageService,
  type ThrottlerModuleOptions,
  type ThrottlerRequest,
} from '../../lib/throttler/index.js';
import { DEFAULT_MAX_KEYS } from '../../lib/core/stores/memory/options.js';

const run = promisify(execFile);
const PARITY = fileURLToPath(new URL('../migration/throttler-parity-app.ts', import.meta.url));
const BYTES = fileURLToPath(new URL('../migration/memory-bytes.ts', import.meta.url));
const PLATFORMS = ['express', 'fastify'] as const;

async function result<T>(script: string, args: string[], flags: string[] = []): Promise<T> {
  const { stdout } = await run(
    process.execPath,
    [...flags, '--import', 'tsx/esm', script, ...args],
    {
      timeout: 120_000,
    },
  );
  const line = /^result (.*)$/m.exec(stdout);
  if (!line) throw new Error(`${args.join(' ')} printed no result: ${stdout}`);
  return JSON.parse(line[1]!) as T;
}

const both = <T>(platform: string, scenario: string) =>
  Promise.all([
    result<T>(PARITY, ['real', platform, scenario]),
    result<T>(PARITY, ['ours', platform, scenario]),
  ]);

describe.each(PLATFORMS)('ignoreUserAgents with a global pattern (%s)', (platform) => {
  it('throttlers a 100/60 s, b 1/60 s, c 100/60 s, [/bot/g], six GETs by "bot": both answer 200 200 429 429 429 429 (the lastIndex moves as in 6.7.1: patterns of throttlers after a refusing one are not tested)', async () => {
    const [real, ours] = await both(platform, 'user-agents');
    expect(real).toEqual({ statuses: [200, 200, 429, 429, 429, 429], lastIndex: 0 });
    expect(ours).toEqual(real);
  }, 120_000);
});

describe.each(PLATFORMS)('a user function that throws never lifts a limit (%s)', (platform) => {
  it('limit, ttl, blockDuration, skipIf, getTracker, generateKey throwing on a bogus API key (or a limit giving undefined): 20 of 20 refused with the error, 500, on both; an HttpException keeps its status (401); a known key is limited', async () => {
    const [real, ours] = await both<Record<string, unknown>>(platform, 'throwing');
    const refused = { bogus: [500], known: [200, 200, 429] };
    expect(real).toEqual({
      limit: refused,
      ttl: refused,
      blockDuration: refused,
      undefinedLimit: refused,
      skipIf: refused,
      getTracker: refused,
      generateKey: refused,
      unauthorized: { bogus: [401], known: [200, 200, 429] },
    });
    expect(ours).toEqual(real);
  }, 120_000);
});

type Answer = {
  status: number;
  retryAfter: string | null;
  limit: string | null;
  remaining: string | null;
  reset: string | null;
  message?: string;
};
const passes = (remaining: number, reset: number): Answer => ({
  status: 200,
  retryAfter: null,
  limit: '2',
  remaining: String(remaining),
  reset: String(reset),
});
/** A refusal during a block, with what the app's `errorMessage` function was handed. */
const refusal = (retryAfter: number, timeToExpire: number): Answer => ({
  status: 429,
  retryAfter: String(retryAfter),
  limit: null,
  remaining: null,
  reset: null,
  message: `totalHits 3, timeToExpire ${timeToExpire}, timeToBlockExpire ${retryAfter}`,
});

describe.each(PLATFORMS)('after a blockDuration ends (%s)', (platform) => {
  it("{ ttl: 4000, limit: 2, blockDuration: 2000 }, stepped clock: the same statuses, Retry-After and X-RateLimit-Remaining; at 2600 ms, after the block, 6.7.1 says X-RateLimit-Reset 2 (the window of 0 ms goes on) and the drop-in 4 (a fresh window); during the block an errorMessage function is handed timeToExpire 4 by the drop-in (6.7.1: the window's rest, 4 then 3)", async () => {
    const [real, ours] = await both<Record<string, Answer[]>>(platform, 'block-ends');
    const before = { 0: [passes(1, 4), passes(0, 4)], 4700: [passes(1, 4)] };
    expect(real).toEqual({
      ...before,
      500: [refusal(2, 4)],
      1500: [refusal(1, 3)],
      2600: [passes(1, 2), passes(0, 2), refusal(2, 2)],
    });
    expect(ours).toEqual({
      ...before,
      500: [refusal(2, 4)],
      1500: [refusal(1, 4)],
      2600: [passes(1, 4), passes(0, 4), refusal(2, 4)],
    });
  }, 120_000);
});

describe.each(PLATFORMS)('settings at the edges, stepped clock (%s)', (platform) => {
  it('limit 0 refuses every request (6.7.1 admits one when each block ends); limit Infinity says the whole ttl in X-RateLimit-Reset; a ttl or blockDuration of Infinity or 50 years says 2^40 ms in seconds, not "Infinity" or 1576800000; ttl 0 is a 1 ms window (6.7.1 never refuses); a fractional limit admits its whole part even with blockDuration 0 (6.7.1 rounds up there); everything else alike', async () => {
    const [real, ours] = await both<Record<string, string[]>>(platform, 'edges');
    const MAX_S = '1099511628';
    const alike = {
      'limit 2.5': [
        '0: 200 limit=2.5 remaining=1.5 reset=1',
        '0: 200 limit=2.5 remaining=0.5 reset=1',
        '0: 429 retry-after=1',
        '0: 429 retry-after=1',
      ],
    };
    expect(real).toEqual({
      ...alike,
      'limit 0': [
        '0: 429 retry-after=2',
        '1000: 429 retry-after=1',
        '2100: 200 limit=0 remaining=0 reset=2',
        '2100: 429 retry-after=2',
      ],
      'limit Infinity': [
        '0: 200 limit=Infinity remaining=Infinity reset=60',
        '10000: 200 limit=Infinity remaining=Infinity reset=50',
      ],
      'ttl Infinity': ['0: 200 limit=1 remaining=0 reset=Infinity', '0: 429 retry-after=Infinity'],
      'ttl 50 years': [
        '0: 200 limit=1 remaining=0 reset=1576800000',
        '0: 429 retry-after=1576800000',
      ],
      'blockDuration Infinity': [
        '0: 200 limit=1 remaining=0 reset=1',
        '0: 429 retry-after=Infinity',
      ],
      'blockDuration 50 years': [
        '0: 200 limit=1 remaining=0 reset=1',
        '0: 429 retry-after=1576800000',
      ],
      'ttl 0': ['0: 200 limit=1 remaining=0 reset=0', '0: 200 limit=1 remaining=0 reset=0'],
      'limit 2.5, blockDuration 0': [
        '0: 200 limit=2.5 remaining=1.5 reset=1',
        '0: 200 limit=2.5 remaining=0.5 reset=1',
        '0: 200 limit=2.5 remaining=0 reset=1',
        '0: 429 retry-after=1',
      ],
    });
    expect(ours).toEqual({
      ...alike,
      'limit 0': [
        '0: 429 retry-after=2',
        '1000: 429 retry-after=2',
        '2100: 429 retry-after=2',
        '2100: 429 retry-after=2',
      ],
      'limit Infinity': [
        '0: 200 limit=Infinity remaining=Infinity reset=60',
        '10000: 200 limit=Infinity remaining=Infinity reset=60',
      ],
      'ttl Infinity': [`0: 200 limit=1 remaining=0 reset=${MAX_S}`, `0: 429 retry-after=${MAX_S}`],
      'ttl 50 years': [`0: 200 limit=1 remaining=0 reset=${MAX_S}`, `0: 429 retry-after=${MAX_S}`],
      'blockDuration Infinity': [
        '0: 200 limit=1 remaining=0 reset=1',
        `0: 429 retry-after=${MAX_S}`,
      ],
      'blockDuration 50 years': [
        '0: 200 limit=1 remaining=0 reset=1',
        `0: 429 retry-after=${MAX_S}`,
      ],
      'ttl 0': ['0: 200 limit=1 remaining=0 reset=1', '0: 429 retry-after=1'],
      'limit 2.5, blockDuration 0': alike['limit 2.5'],
    });
  }, 120_000);
});

describe('graphql-ws: one tracker per client address, never one for all', () => {
  it('{ ttl: 60000, limit: 3 }: 127.0.0.1 gets 3 subscriptions, then .2, .3 and .4 each get their first; 6.7.1 pools them all (req.ip of the graphql-ws context is undefined) and refuses .2, .3, .4', async () => {
    const [real, ours] = await both<Record<string, string[]>>('express', 'graphql-ws');
    const refused = 'ThrottlerException: Too Many Requests';
    const first = ['data', 'data', 'data', refused];
    expect(ours).toEqual({
      '127.0.0.1': first,
      '127.0.0.2': ['data'],
      '127.0.0.3': ['data'],
      '127.0.0.4': ['data'],
    });
    expect(real).toEqual({
      '127.0.0.1': first,
      '127.0.0.2': [refused],
      '127.0.0.3': [refused],
      '127.0.0.4': [refused],
    });
  }, 120_000);
});

type Measured = { keys: number; bytes: number; bytesPerKey: number };

describe('memory: the in-memory storages are bounded in bytes', () => {
  it(`250,000 trackers: ours keeps ${DEFAULT_MAX_KEYS.toLocaleString('en')} keys in at most 128 MB of heap (about 500 B each); 6.7.1 keeps all 250,000 at about 780 B each`, async () => {
    const args = (which: string) => [which, '250000'];
    const [real, ours, store] = (await Promise.all(
      ['real', 'ours', 'store'].map((which) =>
        result<Measured>(BYTES, args(which), ['--expose-gc']),
      ),
    )) as [Measured, Measured, Measured];
    expect(ours.keys).toBe(200_000);
    expect(store.keys).toBeLessThanOrEqual(200_000);
    expect(ours.bytes).toBeLessThan(128 * 2 ** 20);
    expect(store.bytes).toBeLessThan(128 * 2 ** 20);
    expect(real.keys).toBe(250_001);
    expect(real.bytesPerKey).toBeGreaterThan(ours.bytesPerKey);
  }, 120_000);
});

/**
 * A guard that counts through the storage itself, as AFFiNE's CloudThrottlerGuard does: its
 * own key, `this.storageService.increment`, its own headers and refusal.
 */
@Injectable()
class CountsItself extends ThrottlerGuard {
  static warnings: string[] = [];
  protected override async handleRequest(request: ThrottlerRequest): Promise<boolean> {
    const { context, limit, ttl, blockDuration, throttler } = request;
    const { req, res } = this.getRequestResponse(context);
    const tracker = `throttler:${String(req.ip)}`;
    const key = `${tracker};${throttler.name}`;
    const record = await this.storageService.increment(
      key,
      ttl,
      limit,
      blockDuration,
      throttler.name!,
    );
    if (record.isBlocked) throw new ThrottlerException();
    res.header('X-RateLimit-Remaining', Math.max(0, limit - record.totalHits));
    return true;
  }
}

@Controller('cats')
class Cats {
  @Get()
  list() {
    return 'cats';
  }
}

const apps: INestApplication[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function start(
  options: ThrottlerModuleOptions,
  platform: string,
  guard: Type = CountsItself,
) {
  @Module({
    imports: [ThrottlerModule.forRoot(options)],
    controllers: [Cats],
    providers: [{ provide: APP_GUARD, useClass: guard }],
  })
  class App {}
  const settings = { logger: false as const, abortOnError: false };
  const app =
    platform === 'fastify'
      ? await NestFactory.create(App, new FastifyAdapter(), settings)
      : await NestFactory.create(App, settings);
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  const url = `${(await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1')}/cats`;
  return async (n: number) => {
    const seen: number[] = [];
    for (let i = 0; i < n; i++) {
      const res = await fetch(url);
      await res.arrayBuffer();
      seen.push(res.status);
    }
    return seen;
  };
}

describe.each(PLATFORMS)(
  'a handleRequest override that calls storage.increment itself (%s)',
  (platform) => {
    it('Redis unreachable: RateLimitRedisStorage.increment admits (fail-open), logged once; was 500', async () => {
      const warnings: string[] = [];
      class Logged extends CountsItself {
        protected override logger = { warn: (m: string) => warnings.push(m) } as never;
      }
      const storage = new RateLimitRedisStorage(
        { host: '127.0.0.1', port: 1, disconnectTimeout: 50 },
        { timeoutMs: 200 },
      );
      const get = await start(
        { throttlers: [{ ttl: 60_000, limit: 1 }], storage },
        platform,
        Logged,
      );
      expect(await get(3)).toEqual([200, 200, 200]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/^rate_limit\.backend_error/);
    });

    it('no blockDuration set: refused until the window ends, not a whole ttl from the refusal (nestjs/throttler#2208), injected clock: 2 per 2 s at 0, 1200, 1200, 2400 ms answer 200 200 429 200', async () => {
      let now = 1_000_000;
      const storage = new ThrottlerStorageService({ clock: () => now });
      const get = await start({ throttlers: [{ ttl: 2000, limit: 2 }], storage }, platform);
      const seen = await get(1);
      now += 1200;
      seen.push(...(await get(2)));
      now += 1200;
      seen.push(...(await get(1)));
      expect(seen).toEqual([200, 200, 429, 200]);
    });

    it("each hit expires ttl after it, as 6.7.1's storage does (was a fixed window): { ttl: 1000, limit: 2 }, injected clock, hits at 0, 900, 1050, 1060, 1070 ms answer 200 200 200 429 429", async () => {
      const start0 = 1_000_000;
      let now = start0;
      const storage = new ThrottlerStorageService({ clock: () => now });
      const get = await start({ throttlers: [{ ttl: 1000, limit: 2 }], storage }, platform);
      const seen: number[] = [];
      for (const at of [0, 900, 1050, 1060, 1070]) {
        now = start0 + at;
        seen.push(...(await get(1)));
      }
      expect(seen).toEqual([200, 200, 200, 429, 429]);
    });

    it('a blockDuration that is set is kept: { ttl: 2000, limit: 2, blockDuration: 2000 } still refuses at 2400 ms', async () => {
      let now = 1_000_000;
      const storage = new ThrottlerStorageService({ clock: () => now });
      const get = await start(
        { throttlers: [{ ttl: 2000, limit: 2, blockDuration: 2000 }], storage },
        platform,
      );
      const seen = await get(1);
      now += 1200;
      seen.push(...(await get(2)));
      now += 1200;
      seen.push(...(await get(1)));
      expect(seen).toEqual([200, 200, 429, 429]);
    });
  },
);
