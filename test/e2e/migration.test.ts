/**
 * The migration guide from @nestjs/throttler (README, "Migration guide"), row by row: the
 * same app on the throttler and on this package answers the same request sequence with the
 * same statuses. Ours runs on Redis and on the memory store, on Express and Fastify; the
 * throttler on its own memory storage. Each row's two forms are quoted from the README.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Param } from '@nestjs/common';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  keys,
  RateLimit,
  rateLimitContext,
  SkipRateLimit,
  type RateLimitModuleOptions,
} from '../../lib/index.js';
import { createApp, PLATFORMS, type Platform } from './support/app.js';

const README = readFileSync(
  new URL('../../docs/guides/migrating-from-throttler.md', import.meta.url),
  'utf8',
);

// The app of every row; its @nestjs/throttler twin is in test/migration/throttler-app.ts.
@Controller('cats')
class LimitedCats {
  @Get()
  list() {
    return 'cats';
  }
  @Get('hot')
  @RateLimit('3/m', { algorithm: 'fixed-window' })
  hot() {
    return 'hot';
  }
  @Get('free')
  @SkipRateLimit('default')
  free() {
    return 'free';
  }
  @Get('no-long')
  @SkipRateLimit('long')
  noLong() {
    return 'no-long';
  }
  @Get(':id')
  one(@Param('id') id: string) {
    return id;
  }
}

interface Call {
  path: string;
  headers?: Record<string, string>;
  /** Real time to let pass before the call, in **ms**. */
  waitMs?: number;
}

interface Row {
  /** The row's two cells, as the README writes them. */
  throttlerForm: string;
  ourForm: string;
  ours: RateLimitModuleOptions;
  calls: Call[];
  /** The statuses both answer. */
  expected: number[];
}

const times = (n: number, call: Call): Call[] => new Array<Call>(n).fill(call);

const ROWS: Row[] = [
  {
    throttlerForm: '`ThrottlerModule.forRoot([{ ttl: 60000, limit: 10 }])`',
    ourForm:
      "`RateLimitModule.forRoot({ default: { rate: '10/m', scope: 'route', algorithm: 'fixed-window' } })`",
    ours: { default: { rate: '10/m', scope: 'route', algorithm: 'fixed-window' } },
    // A budget per route: the 11th /cats is refused, /cats/1 has its own.
    calls: [...times(10, { path: '/cats' }), { path: '/cats/1' }, { path: '/cats' }],
    expected: [...new Array<number>(10).fill(200), 200, 429],
  },
  {
    throttlerForm:
      "`ThrottlerModule.forRoot([{ name: 'short', ttl: 10000, limit: 3 }, { name: 'long', ttl: 60000, limit: 5 }])`",
    ourForm:
      "`default: [{ name: 'short', rate: '3/10s', scope: 'route', algorithm: 'fixed-window' }, { name: 'long', rate: '5/m', scope: 'route', algorithm: 'fixed-window' }]`",
    ours: {
      default: [
        { name: 'short', rate: '3/10s', scope: 'route', algorithm: 'fixed-window' },
        { name: 'long', rate: '5/m', scope: 'route', algorithm: 'fixed-window' },
      ],
    },
    calls: [...times(4, { path: '/cats' }), ...times(3, { path: '/cats/2' })],
    expected: [200, 200, 200, 429, 200, 200, 200],
  },
  {
    throttlerForm: '`@Throttle({ default: { limit: 3, ttl: 60000 } })`',
    ourForm: "`@RateLimit('3/m', { algorithm: 'fixed-window' })`",
    ours: { default: { rate: '10/m', scope: 'route', algorithm: 'fixed-window' } },
    calls: times(4, { path: '/cats/hot' }),
    expected: [200, 200, 200, 429],
  },
  {
    throttlerForm: '`@SkipThrottle()`',
    ourForm: "`@SkipRateLimit('default')`",
    ours: { default: { rate: '2/m', scope: 'route', algorithm: 'fixed-window' } },
    calls: [...times(3, { path: '/cats/free' }), ...times(3, { path: '/cats' })],
    expected: [200, 200, 200, 200, 200, 429],
  },
  {
    throttlerForm: '`@SkipThrottle({ long: true })`',
    ourForm: "`@SkipRateLimit('long')`",
    ours: {
      default: [
        { name: 'short', rate: '3/10s', scope: 'route', algorithm: 'fixed-window' },
        { name: 'long', rate: '2/m', scope: 'route', algorithm: 'fixed-window' },
      ],
    },
    calls: [...times(4, { path: '/cats/no-long' }), ...times(3, { path: '/cats' })],
    expected: [200, 200, 200, 429, 200, 200, 429],
  },
  {
    throttlerForm: "`getTracker: (req) => req.headers['x-api-key']`",
    ourForm: "`key: keys.header('x-api-key')` on the default",
    ours: {
      default: {
        rate: '2/m',
        scope: 'route',
        algorithm: 'fixed-window',
        key: keys.header('x-api-key'),
      },
    },
    calls: [
      ...times(3, { path: '/cats', headers: { 'x-api-key': 'a' } }),
      { path: '/cats', headers: { 'x-api-key': 'b' } },
    ],
    expected: [200, 200, 429, 200],
  },
  {
    throttlerForm:
      "`skipIf: (context) => context.switchToHttp().getRequest().headers['x-internal'] === '1'`",
    ourForm: "`skip: (ctx) => rateLimitContext(ctx).request?.headers['x-internal'] === '1'`",
    ours: {
      default: { rate: '2/m', scope: 'route', algorithm: 'fixed-window' },
      skip: (ctx) => rateLimitContext(ctx).request?.headers['x-internal'] === '1',
    },
    calls: [
      ...times(3, { path: '/cats', headers: { 'x-internal': '1' } }),
      ...times(3, { path: '/cats' }),
    ],
    expected: [200, 200, 200, 200, 200, 429],
  },
  {
    throttlerForm: '`ignoreUserAgents: [/bot/]`',
    ourForm:
      "`skip: (ctx) => /bot/.test(rateLimitContext(ctx).request?.headers['user-agent'] ?? '')`",
    ours: {
      default: { rate: '2/m', scope: 'route', algorithm: 'fixed-window' },
      skip: (ctx) => /bot/.test(rateLimitContext(ctx).request?.headers['user-agent'] ?? ''),
    },
    calls: [
      ...times(3, { path: '/cats', headers: { 'user-agent': 'googlebot/2.1' } }),
      ...times(3, { path: '/cats', headers: { 'user-agent': 'curl/8' } }),
    ],
    expected: [200, 200, 200, 200, 200, 429],
  },
  {
    throttlerForm: "`errorMessage: 'Slow down'`",
    ourForm: "`errorMessage: 'Slow down'`",
    ours: {
      default: { rate: '1/m', scope: 'route', algorithm: 'fixed-window' },
      errorMessage: 'Slow down',
    },
    calls: times(2, { path: '/cats' }),
    expected: [200, 429],
  },
  {
    throttlerForm: '`ThrottlerModule.forRoot([{ ttl: 1000, limit: 2, blockDuration: 60000 }])`',
    ourForm: "`default: { rate: '2/s', scope: 'route', algorithm: 'fixed-window', block: '1m' }`",
    ours: { default: { rate: '2/s', scope: 'route', algorithm: 'fixed-window', block: '1m' } },
    // The 3rd request starts the block: a second later the rate alone would admit, the
    // block still refuses (the throttler counts from the refusal as ours does).
    calls: [...times(3, { path: '/cats' }), { path: '/cats', waitMs: 1100 }],
    expected: [200, 200, 429, 429],
  },
];

interface Answer {
  status: number;
  message?: unknown;
}

async function drive(url: string, calls: Call[]): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (const call of calls) {
    if (call.waitMs) await new Promise((resolve) => setTimeout(resolve, call.waitMs));
    const res = await fetch(`${url}${call.path}`, { headers: call.headers });
    const text = await res.text();
    answers.push({
      status: res.status,
      message: res.status === 429 ? (JSON.parse(text) as { message?: unknown }).message : undefined,
    });
  }
  return answers;
}

/** The throttler's apps of every row, in order, served by a child process per platform. */
async function startThrottler(
  platform: Platform,
): Promise<{ urls: string[]; stop(): Promise<void> }> {
  const script = fileURLToPath(new URL('../migration/throttler-app.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx/esm', script, platform], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const urls = await new Promise<string[]>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = /^listening (.*)$/m.exec(out);
      if (line) resolve(JSON.parse(line[1]!) as string[]);
    });
    child.once('exit', (code) => reject(new Error(`throttler app exited ${code}: ${err}`)));
  });
  return {
    urls,
    stop: async () => {
      if (child.exitCode === null) {
        child.kill();
        await once(child, 'exit');
      }
    },
  };
}

async function ourAnswers(
  platform: Platform,
  row: Row,
  store: 'redis' | 'memory',
): Promise<Answer[]> {
  const h = await createApp(
    platform,
    { ...row.ours, ...(store === 'memory' && { store: 'memory' }) },
    [LimitedCats],
  );
  try {
    return await drive(h.url, row.calls);
  } finally {
    await h.close();
  }
}

describe('the docs migration guide', () => {
  it.each(ROWS.map((r) => [r.throttlerForm, r.ourForm]))(
    'has the row %s → %s',
    (throttlerForm, ourForm) => {
      const line = README.split('\n').find((l) => l.startsWith(`| ${throttlerForm} `));
      expect(line).toBeDefined();
      expect(line).toContain(ourForm);
    },
  );
});

describe.each(PLATFORMS)('migrating from @nestjs/throttler on %s', (platform) => {
  let throttler: Awaited<ReturnType<typeof startThrottler>>;
  beforeAll(async () => {
    throttler = await startThrottler(platform);
    expect(throttler.urls).toHaveLength(ROWS.length);
  }, 60_000);
  afterAll(() => throttler?.stop());

  it.each(ROWS.map((r, i) => [r.throttlerForm, i] as const))(
    '%s answers the same statuses on both, Redis and memory',
    async (_form, i) => {
      const row = ROWS[i]!;
      const theirs = await drive(throttler.urls[i]!, row.calls);
      expect(theirs.map((a) => a.status)).toEqual(row.expected);
      for (const store of ['redis', 'memory'] as const) {
        const ours = await ourAnswers(platform, row, store);
        expect([store, ours.map((a) => a.status)]).toEqual([store, row.expected]);
        // The refusal's message too, where the row sets one.
        if (row.ours.errorMessage !== undefined) {
          expect(ours.filter((a) => a.status === 429).map((a) => a.message)).toEqual(
            theirs.filter((a) => a.status === 429).map((a) => a.message),
          );
        }
      }
    },
  );
});
