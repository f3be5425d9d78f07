/**
 * The scenarios of test/e2e/throttler-parity.test.ts, each run in a process of its own with the
 * same code on either throttler: `real` is @nestjs/throttler 6.7.1, `ours` the drop-in
 * (lib/throttler); on Express or Fastify (see throttler-app.ts for why a process of its own).
 *
 *   node --import tsx/esm test/migration/throttler-parity-app.ts <real|ours> <express|fastify> <scenario>
 *
 * prints `result <json>` and exits.
 */
import 'reflect-metadata';
import {
  Controller,
  Get,
  Module,
  UnauthorizedException,
  UseGuards,
  type ExecutionContext,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';

type Api = typeof import('../../lib/throttler/index.js');
type Platform = 'express' | 'fastify';

async function load(which: string): Promise<Api> {
  if (which === 'real') return (await import('@nestjs/throttler')) as unknown as Api;
  if (which === 'ours') return import('../../lib/throttler/index.js');
  throw new Error(`unknown throttler ${which}: real or ours`);
}

async function listen(
  module: Type,
  platform: Platform,
): Promise<{ url: string; close(): Promise<void> }> {
  const settings = { logger: false as const, abortOnError: false };
  const app =
    platform === 'fastify'
      ? await NestFactory.create(module, new FastifyAdapter(), settings)
      : await NestFactory.create(module, settings);
  await app.listen(0, '127.0.0.1');
  return {
    url: (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1'),
    close: () => app.close(),
  };
}

async function statuses(url: string, n: number, headers: Record<string, string> = {}) {
  const seen: number[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(url, { headers });
    await res.arrayBuffer();
    seen.push(res.status);
  }
  return seen;
}

@Controller('cats')
class Cats {
  @Get()
  list() {
    return 'cats';
  }
}

/** An app with `options` and the plain guard, serving GET /cats. */
function appOf(api: Api, options: object): Type {
  @Module({
    imports: [api.ThrottlerModule.forRoot(options as never)],
    controllers: [Cats],
    providers: [{ provide: APP_GUARD, useClass: api.ThrottlerGuard }],
  })
  class App {}
  return App;
}

/**
 * Three throttlers a (100/60 s), b (1/60 s), c (100/60 s) and `ignoreUserAgents: [/bot/g]`
 * (the Nest docs' form): six GETs by `User-Agent: bot`, and the pattern's `lastIndex` after.
 */
async function userAgents(api: Api, platform: Platform): Promise<unknown> {
  const bot = /bot/g;
  const app = await listen(
    appOf(api, {
      throttlers: [
        { name: 'a', ttl: 60_000, limit: 100 },
        { name: 'b', ttl: 60_000, limit: 1 },
        { name: 'c', ttl: 60_000, limit: 100 },
      ],
      ignoreUserAgents: [bot],
    }),
    platform,
  );
  const seen = await statuses(`${app.url}/cats`, 6, { 'user-agent': 'bot' });
  await app.close();
  return { statuses: seen, lastIndex: bot.lastIndex };
}

/** What a client reads from one answer: the status and the throttler's headers (null: absent). */
interface Answer {
  status: number;
  retryAfter: string | null;
  limit: string | null;
  remaining: string | null;
  reset: string | null;
  /** A refusal's message (the app's `errorMessage`), when asked for. */
  message?: string;
}

async function answers(url: string, n: number, withMessage = false): Promise<Answer[]> {
  const seen: Answer[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(url);
    const body = await res.text();
    const h = (name: string) => res.headers.get(name);
    seen.push({
      status: res.status,
      retryAfter: h('retry-after'),
      limit: h('x-ratelimit-limit'),
      remaining: h('x-ratelimit-remaining'),
      reset: h('x-ratelimit-reset'),
      ...(withMessage &&
        res.status === 429 && { message: (JSON.parse(body) as { message: string }).message }),
    });
  }
  return seen;
}

/**
 * A stepped clock for both throttlers: `Date.now` is all 6.7.1's storage reads (it has no
 * clock option), and the drop-in's in-memory storage takes `Date.now` when it is built, so
 * the clock is replaced before the app is. Returns `at(ms)`: moves the clock to `ms` after
 * the start.
 */
function steppedClock(): (ms: number) => void {
  const start = Date.now();
  let now = start;
  Date.now = () => now;
  return (ms) => void (now = start + ms);
}

/**
 * `{ ttl: 4000, limit: 2, blockDuration: 2000 }` on a stepped clock (ms): 2 GETs at 0, one
 * at 500 (refused: the block runs to 2500), one at 1500, 3 at 2600 (after the block), one at
 * 4700 (after the block the third of 2600 started), each answer with its headers, and each
 * refusal with what an `errorMessage` function is handed.
 */
async function blockEnds(api: Api, platform: Platform): Promise<unknown> {
  const at = steppedClock();
  const app = await listen(
    appOf(api, {
      throttlers: [{ ttl: 4000, limit: 2, blockDuration: 2000 }],
      errorMessage: (_context: ExecutionContext, d: Record<string, number>) =>
        `totalHits ${d.totalHits}, timeToExpire ${d.timeToExpire}, timeToBlockExpire ${d.timeToBlockExpire}`,
    }),
    platform,
  );
  const seen: Record<number, Answer[]> = {};
  for (const [ms, n] of [
    [0, 2],
    [500, 1],
    [1500, 1],
    [2600, 3],
    [4700, 1],
  ] as const) {
    at(ms);
    seen[ms] = await answers(`${app.url}/cats`, n, true);
  }
  await app.close();
  return seen;
}

/** An answer in one line: the status, then each header present (`retry-after=2 limit=1 ...`). */
function line(a: Answer): string {
  const { status, retryAfter, ...rest } = a;
  const fields = { 'retry-after': retryAfter, ...rest };
  const present = Object.entries(fields).filter(([, value]) => value !== null);
  return [status, ...present.map(([name, value]) => `${name}=${value}`)].join(' ');
}

const YEARS_50 = 50 * 365 * 86_400_000;
/** Settings at the edges of what the throttler takes, each with its requests: [ms, GETs]. */
const EDGES: Record<string, [object, (readonly [number, number])[]]> = {
  'limit 0': [
    { ttl: 2000, limit: 0 },
    [
      [0, 1],
      [1000, 1],
      [2100, 2],
    ],
  ],
  'limit Infinity': [
    { ttl: 60_000, limit: Infinity },
    [
      [0, 1],
      [10_000, 1],
    ],
  ],
  'ttl Infinity': [{ ttl: Infinity, limit: 1 }, [[0, 2]]],
  'ttl 50 years': [{ ttl: YEARS_50, limit: 1 }, [[0, 2]]],
  'blockDuration Infinity': [{ ttl: 1000, limit: 1, blockDuration: Infinity }, [[0, 2]]],
  'blockDuration 50 years': [{ ttl: 1000, limit: 1, blockDuration: YEARS_50 }, [[0, 2]]],
  'ttl 0': [{ ttl: 0, limit: 1 }, [[0, 2]]],
  'limit 2.5, blockDuration 0': [{ ttl: 1000, limit: 2.5, blockDuration: 0 }, [[0, 4]]],
  'limit 2.5': [{ ttl: 1000, limit: 2.5 }, [[0, 4]]],
};

/**
 * Each of {@link EDGES} on a fresh app and a stepped clock: per setting, its answers as
 * `<ms>: <line>`.
 */
async function edges(api: Api, platform: Platform): Promise<unknown> {
  const at = steppedClock();
  const result: Record<string, string[]> = {};
  for (const [name, [throttler, steps]] of Object.entries(EDGES)) {
    at(0);
    const app = await listen(appOf(api, { throttlers: [throttler] }), platform);
    result[name] = [];
    for (const [ms, n] of steps) {
      at(ms);
      for (const a of await answers(`${app.url}/cats`, n)) result[name].push(`${ms}: ${line(a)}`);
    }
    await app.close();
  }
  return result;
}

const PLANS: Record<string, { limit: number }> = { free: { limit: 2 } };
type Req = { headers: Record<string, string | undefined> };
const reqOf = (ctx: ExecutionContext) => ctx.switchToHttp().getRequest<Req>();
const plan = (ctx: ExecutionContext) => PLANS[reqOf(ctx).headers['x-api-key']!]!;

/**
 * A user function that throws on the client's input, for each place one can be given: 20
 * GETs with a bogus key, then 3 with a known key (`free`: 2 per minute), per place.
 */
async function throwing(api: Api, platform: Platform): Promise<unknown> {
  const base = { ttl: 60_000, limit: 2 };
  const places: Record<string, object> = {
    limit: { throttlers: [{ ttl: 60_000, limit: (ctx: ExecutionContext) => plan(ctx).limit }] },
    ttl: { throttlers: [{ ...base, ttl: (ctx: ExecutionContext) => 60_000 + plan(ctx).limit }] },
    blockDuration: {
      throttlers: [{ ...base, blockDuration: (ctx: ExecutionContext) => plan(ctx).limit * 1000 }],
    },
    // A function that returns no number (the known key gives one).
    undefinedLimit: {
      throttlers: [
        {
          ttl: 60_000,
          limit: (ctx: ExecutionContext) => PLANS[reqOf(ctx).headers['x-api-key']!]?.limit,
        },
      ],
    },
    skipIf: { throttlers: [base], skipIf: (ctx: ExecutionContext) => plan(ctx).limit > 100 },
    getTracker: {
      throttlers: [base],
      getTracker: (req: Req) =>
        `${plan({ switchToHttp: () => ({ getRequest: () => req }) } as never).limit}`,
    },
    generateKey: {
      throttlers: [base],
      generateKey: (ctx: ExecutionContext, tracker: string) => `${tracker}:${plan(ctx).limit}`,
    },
    // The app chose the answer: its own HttpException.
    unauthorized: {
      throttlers: [
        {
          ttl: 60_000,
          limit: (ctx: ExecutionContext) => {
            const known = PLANS[reqOf(ctx).headers['x-api-key']!];
            if (!known) throw new UnauthorizedException('unknown API key');
            return known.limit;
          },
        },
      ],
    },
  };
  const result: Record<string, unknown> = {};
  for (const [place, options] of Object.entries(places)) {
    const app = await listen(appOf(api, options), platform);
    const bogus = new Set(await statuses(`${app.url}/cats`, 20, { 'x-api-key': 'bogus' }));
    const known = await statuses(`${app.url}/cats`, 3, { 'x-api-key': 'free' });
    await app.close();
    result[place] = { bogus: [...bogus], known };
  }
  return result;
}

/**
 * The README's GraphQL guard on a subscription, `{ ttl: 60000, limit: 3 }`: a graphql-ws client
 * from 127.0.0.1 subscribes 4 times, then one from each of 127.0.0.2, .3 and .4 once.
 */
async function graphqlWs(api: Api): Promise<unknown> {
  const { GraphQLModule, GqlExecutionContext, Query, Resolver, Subscription, Int } =
    await import('@nestjs/graphql');
  const { ApolloDriver } = await import('@nestjs/apollo');
  const { createClient } = await import('graphql-ws');
  const WebSocket = (await import('ws')).default;
  class GqlThrottlerGuard extends api.ThrottlerGuard {
    override getRequestResponse(context: ExecutionContext) {
      const ctx = GqlExecutionContext.create(context).getContext();
      // A subscription has no response: `{}` takes no header (6.7.1 needs one, #2382).
      return { req: ctx.req, res: ctx.res ?? {} };
    }
  }
  @Resolver()
  class Ticks {
    @Query(() => String)
    ping() {
      return 'pong';
    }
    @Subscription(() => Int)
    @UseGuards(GqlThrottlerGuard)
    ticks() {
      return (async function* () {
        yield { ticks: 1 };
      })();
    }
  }
  @Module({
    imports: [
      api.ThrottlerModule.forRoot([{ ttl: 60_000, limit: 3 }]),
      GraphQLModule.forRoot({
        driver: ApolloDriver,
        autoSchemaFile: true,
        subscriptions: { 'graphql-ws': true },
      }),
    ],
    providers: [Ticks],
  })
  class App {}
  const app = await listen(App, 'express');
  const subscribeFrom = (localAddress: string) => {
    class Bound extends WebSocket {
      constructor(url: string, protocols?: string | string[]) {
        super(url, protocols, { localAddress });
      }
    }
    const client = createClient({
      url: `${app.url.replace('http', 'ws')}/graphql`,
      webSocketImpl: Bound,
      retryAttempts: 0,
    });
    return new Promise<string>((resolve) => {
      const seen: string[] = [];
      client.subscribe(
        { query: 'subscription { ticks }' },
        {
          next: (value) => void seen.push(value.errors ? String(value.errors[0]!.message) : 'data'),
          error: (error) => resolve(`error ${String((error as Error).message ?? error)}`),
          complete: () => resolve(seen.join(',')),
        },
      );
    }).finally(() => client.dispose());
  };
  const answers: Record<string, string[]> = {};
  for (const [address, n] of [
    ['127.0.0.1', 4],
    ['127.0.0.2', 1],
    ['127.0.0.3', 1],
    ['127.0.0.4', 1],
  ] as const) {
    answers[address] = [];
    for (let i = 0; i < n; i++) answers[address].push(await subscribeFrom(address));
  }
  await app.close();
  return answers;
}

const SCENARIOS: Record<string, (api: Api, platform: Platform) => Promise<unknown>> = {
  'user-agents': userAgents,
  throwing,
  'graphql-ws': graphqlWs,
  'block-ends': blockEnds,
  edges,
};

async function main(): Promise<void> {
  const [which = '', platform = '', scenario = ''] = process.argv.slice(2);
  const api = await load(which);
  const run = SCENARIOS[scenario];
  if (!run) throw new Error(`unknown scenario ${scenario}: ${Object.keys(SCENARIOS).join(', ')}`);
  if (platform !== 'express' && platform !== 'fastify')
    throw new Error(`unknown platform ${platform}`);
  console.log(`result ${JSON.stringify(await run(api, platform))}`);
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack : error);
  process.exit(1);
});
