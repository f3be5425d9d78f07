/**
 * Issue 22, findings 3 and 4: a concurrency slot is held while its handler runs, whatever the
 * client does (abort, HTTP/2 stream reset), optionally while its body uploads, and its release
 * reaches the store even when the circuit breaker is open or the store was down at the time.
 * Handlers count themselves and wait on gates the test opens: "running at once" is what the
 * server did, not what the clients saw.
 */
import 'reflect-metadata';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  Body,
  Controller,
  Get,
  Post,
  Sse,
  StreamableFile,
  type ExecutionContext,
  type MessageEvent,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { once } from 'node:events';
import {
  get as httpGet,
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
} from 'node:http';
import { connect, constants as h2 } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { Subject, type Observable } from 'rxjs';
import type { Redis } from 'ioredis';
import {
  ConcurrencyLimit,
  keys,
  RATE_LIMIT_REDIS,
  RateLimit,
  RateLimiter,
  RateLimitService,
  RedisStore,
  type PolicyInput,
} from '../../lib/index.js';
import { newRedis, redisUrl } from '../harness/redis.js';
import {
  createApp,
  PLATFORMS,
  pollUntil,
  rootModule,
  uniquePrefix,
  type AppHandle,
} from './support/app.js';
import { RedisLink } from './support/redis-link.js';

/**
 * Handlers inside, the most at once, and the gates they wait on; once `passing`, handlers go
 * through at once (between tests: an aborted request may reach the app after its test).
 */
const work = { now: 0, max: 0, gates: [] as (() => void)[], passing: false };
const openGates = () => work.gates.splice(0).forEach((open) => open());
async function held(): Promise<void> {
  work.now++;
  work.max = Math.max(work.max, work.now);
  if (!work.passing) await new Promise<void>((resolve) => work.gates.push(resolve));
  work.now--;
}

@Controller('slots')
class SlotsController {
  @Get('work')
  @ConcurrencyLimit(2, { key: keys.ip })
  async work() {
    await held();
    return 'done';
  }

  @Post('upload')
  @ConcurrencyLimit(2, { key: keys.ip, includeUpload: true })
  upload(@Body() body: { data?: string }) {
    return { length: body.data?.length ?? 0 };
  }

  @Get('file')
  @ConcurrencyLimit(1, { key: keys.ip })
  file() {
    return new StreamableFile((streams.file = new PassThrough()));
  }

  @Sse('events')
  @ConcurrencyLimit(1, { key: keys.ip })
  events(): Observable<MessageEvent> {
    return (streams.events = new Subject<MessageEvent>());
  }
}

/** The bodies the streaming handlers returned last, for the test to write and end. */
const streams = {} as { file?: PassThrough; events?: Subject<MessageEvent> };

const IP = 'ip:127.0.0.1';
const slots = (route: string, concurrent: number): PolicyInput => ({
  name: 'concurrent',
  concurrent,
  scope: `SlotsController.${route}`,
});

/** GET that the client aborts after `ms`: resolves with the status, or 'aborted'. */
async function abortedAfter(url: string, ms: number): Promise<number | 'aborted'> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(ms) });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 'aborted';
  }
}

/**
 * A POST whose JSON body is sent in two parts: the first now, the rest when `finish` is
 * called. `response` resolves with the status as soon as the server answers, body or not.
 */
function slowUpload(url: string): {
  response: Promise<number>;
  finish(): void;
  abandon(): void;
  retryAfter: Promise<string | undefined>;
} {
  const req: ClientRequest = httpRequest(url, {
    method: 'POST',
    agent: false,
    headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
  });
  req.on('error', () => undefined);
  let retryAfter: (value: string | undefined) => void = () => undefined;
  const response = new Promise<number>((resolve) =>
    req.on('response', (res) => {
      res.resume();
      retryAfter(res.headers['retry-after'] as string | undefined);
      resolve(res.statusCode!);
    }),
  );
  req.write('{"data":"');
  return {
    response,
    retryAfter: new Promise((resolve) => (retryAfter = resolve)),
    finish: () => {
      if (!req.destroyed) req.end('xyz"}');
    },
    abandon: () => req.destroy(),
  };
}

describe.each(PLATFORMS)('concurrency slots on %s', (platform) => {
  let h: AppHandle;
  let service: RateLimitService;
  beforeAll(async () => {
    h = await createApp(platform, {}, [SlotsController]);
    service = h.app.get(RateLimitService);
  });
  beforeEach(() => {
    work.passing = false;
  });
  afterEach(async () => {
    work.passing = true;
    openGates();
    await pollUntil(() => Promise.resolve(work.now === 0), 5000);
    await service.reset(IP);
  });
  afterAll(() => h.close());

  const free = async (policy: PolicyInput) =>
    (await service.peek(IP, [policy])).policies[0]!.remaining;

  it('150 requests aborted at 20 ms under @ConcurrencyLimit(2): at most 2 handlers ever run at once', async () => {
    work.max = 0;
    // Two whose handlers are known to run, then aborted: the limit is reached whatever the
    // load on the machine (a request aborted at 20 ms may never reach its handler).
    const first = Array.from({ length: 2 }, () => new AbortController());
    const held = first.map((c) =>
      fetch(`${h.url}/slots/work`, { signal: c.signal }).catch(() => 'aborted'),
    );
    expect(await pollUntil(() => Promise.resolve(work.now === 2), 5000)).toBe(true);
    first.forEach((c) => c.abort());
    await Promise.all(held);
    // In waves of 10, each wave settled (answered or aborted) before the next is sent.
    for (let wave = 0; wave < 15; wave++) {
      await Promise.all(Array.from({ length: 10 }, () => abortedAfter(`${h.url}/slots/work`, 20)));
    }
    // And one whose client waits: refused, the two handlers still running.
    let probe: number | undefined;
    void h.get('/slots/work').then((r) => (probe = r.status));
    await pollUntil(() => Promise.resolve(probe !== undefined || work.now > 2), 5000);
    expect({ probe, running: work.now }).toEqual({ probe: 429, running: 2 });
    // An aborted request may still reach the guard late and run once a slot frees: its
    // handler waits on a gate too, so the gates are opened until every slot is back.
    const quiet = await pollUntil(async () => {
      openGates();
      return work.now === 0 && (await free(slots('work', 2))) === 2;
    }, 5000);
    expect({ mostAtOnce: work.max, slotsBack: quiet }).toEqual({ mostAtOnce: 2, slotsBack: true });
  });

  it('includeUpload: of 20 slow uploads only 2 upload at once; the 18 others are refused before their bodies end', async () => {
    const uploads = Array.from({ length: 20 }, () => slowUpload(`${h.url}/slots/upload`));
    const statuses: number[] = [];
    let refusedOne: (typeof uploads)[number] | undefined;
    for (const u of uploads) {
      void u.response.then((status) => {
        statuses.push(status);
        if (status === 429) refusedOne ??= u;
      });
    }
    const refused = () => statuses.filter((s) => s === 429).length;
    const early = await pollUntil(() => Promise.resolve(refused() === 18), 10_000);
    expect({ refusedWhileUploading: refused(), answered: statuses.length }).toEqual({
      refusedWhileUploading: 18,
      answered: 18,
    });
    expect(early).toBe(true);
    expect(await refusedOne?.retryAfter).toBe('1');
    for (const u of uploads) u.finish();
    const all = await Promise.all(uploads.map((u) => u.response));
    expect(all.filter((s) => s === 201)).toHaveLength(2);
    expect(await pollUntil(async () => (await free(slots('upload', 2))) === 2, 5000)).toBe(true);
  });

  it('a StreamableFile holds its slot until it has been sent', async () => {
    streams.file = undefined;
    const response = new Promise<IncomingMessage>((resolve) =>
      httpGet(`${h.url}/slots/file`, { agent: false }, resolve),
    );
    expect(await pollUntil(() => Promise.resolve(streams.file !== undefined), 5000)).toBe(true);
    // The headers go with the first chunk.
    streams.file!.write('part');
    const res = await response;
    expect(res.statusCode).toBe(200);
    await once(res, 'data');
    expect(await free(slots('file', 1))).toBe(0);
    expect((await h.get('/slots/file')).status).toBe(429);
    const ended = once(res, 'end');
    res.resume();
    streams.file!.end('last');
    await ended;
    expect(await pollUntil(async () => (await free(slots('file', 1))) === 1, 5000)).toBe(true);
  });

  it('Server-Sent Events hold the slot while the stream is open; a client that leaves gives it back', async () => {
    const request = httpGet(`${h.url}/slots/events`, { agent: false });
    request.on('error', () => undefined);
    const [res] = (await once(request, 'response')) as [IncomingMessage];
    expect(res.statusCode).toBe(200);
    streams.events!.next({ data: 'one' });
    await once(res, 'data');
    expect((await h.get('/slots/events')).status).toBe(429);
    request.destroy();
    expect(await pollUntil(async () => (await free(slots('events', 1))) === 1, 5000)).toBe(true);
  });

  it('includeUpload: an upload its client abandons mid-body gives its slot back at once', async () => {
    const abandoned = slowUpload(`${h.url}/slots/upload`);
    expect(await pollUntil(async () => (await free(slots('upload', 2))) === 1, 5000)).toBe(true);
    abandoned.abandon();
    expect(await pollUntil(async () => (await free(slots('upload', 2))) === 2, 5000)).toBe(true);
  });
});

describe.each(PLATFORMS)('a release when the store failed, on %s', (platform) => {
  let link: RedisLink;
  let h: AppHandle;
  let client: Redis;
  /** Reads the slots straight from the shared Redis, never through the link. */
  let direct: RateLimiter;
  let directClient: Redis;
  beforeAll(async () => {
    link = await RedisLink.open(redisUrl());
    h = await createApp(
      platform,
      {
        redis: link.url,
        timeoutMs: 200,
        // Open after 2 failures and stay open past the test: only a release that bypasses it
        // can reach the store.
        circuitBreaker: { failureThreshold: 2, cooldownMs: 120_000 },
      },
      [LeasedController],
    );
    client = h.app.get<Redis>(RATE_LIMIT_REDIS);
    directClient = newRedis({ autoResendUnfulfilledCommands: false });
    direct = new RateLimiter({ store: new RedisStore({ client: directClient }), prefix: h.prefix });
  });
  afterAll(async () => {
    work.passing = true;
    openGates();
    await h.close();
    await link.close();
    await directClient.quit();
  });

  beforeEach(() => {
    work.passing = false;
  });

  const leased: PolicyInput = {
    name: 'concurrent',
    concurrent: 1,
    leaseMs: 60_000,
    scope: 'LeasedController.held',
  };
  const freeSlots = async () => (await direct.peek(IP, [leased])).policies[0]!.remaining;
  const ready = () => pollUntil(() => Promise.resolve(client.status === 'ready'), 10_000);

  it('the store unreachable when the handler ends: the release is kept and lands once it is back', async () => {
    const first = h.get('/leased/held');
    expect(await pollUntil(() => Promise.resolve(work.now === 1), 5000)).toBe(true);
    expect(await freeSlots()).toBe(0);
    link.cut();
    openGates();
    expect((await first).status).toBe(200);
    link.restore();
    expect(await pollUntil(async () => (await freeSlots()) === 1, 10_000)).toBe(true);
  });

  it('the breaker open when the handler ends: the slot is given back, not after leaseMs', async () => {
    expect(await ready()).toBe(true);
    await direct.reset(IP);
    const first = h.get('/leased/held');
    expect(await pollUntil(() => Promise.resolve(work.now === 1), 5000)).toBe(true);
    expect(await freeSlots()).toBe(0);
    link.cut();
    // Two failed store calls open the breaker (for longer than the test).
    await h.get('/leased/other');
    await h.get('/leased/other');
    expect(h.app.get(RateLimiter).circuitState).toBe('open');
    link.restore();
    expect(await ready()).toBe(true);
    openGates();
    expect((await first).status).toBe(200);
    expect(await pollUntil(async () => (await freeSlots()) === 1, 5000)).toBe(true);
  });
});

@Controller('leased')
class LeasedController {
  @Get('held')
  @ConcurrencyLimit(1, { key: keys.ip, leaseMs: 60_000 })
  async held() {
    await held();
    return 'done';
  }

  @Get('other')
  @RateLimit('1000/m', { key: keys.ip })
  other() {
    return 'other';
  }
}

/** Requests whose key waits for the client to reset its stream, handlers run, decisions made. */
const reset = { waiting: 0, ran: 0, decided: 0 };
async function afterStreamReset(ctx: ExecutionContext): Promise<string> {
  const request = ctx.getArgByIndex<{ headers: Record<string, unknown> }>(0);
  if (request.headers['x-cancel'] !== undefined) {
    const reply = ctx.getArgByIndex<{ raw: { once(e: 'close', l: () => void): void } }>(1);
    const closed = new Promise<void>((resolve) => reply.raw.once('close', resolve));
    reset.waiting++;
    await closed;
  }
  return 'h2-client';
}

@Controller('h2')
class Http2Controller {
  @Get('slot')
  @ConcurrencyLimit(2, { key: afterStreamReset })
  slot() {
    reset.ran++;
    return 'done';
  }
}

describe('HTTP/2 on Fastify (http2: true): streams reset before the store answers', () => {
  let app: Awaited<ReturnType<typeof NestFactory.create>>;
  let url: string;
  beforeAll(async () => {
    const module = rootModule(
      {
        redis: redisUrl(),
        prefix: uniquePrefix(),
        timeoutMs: 2000,
        onDecision: () => void reset.decided++,
      },
      [Http2Controller],
    );
    app = await NestFactory.create(module, new FastifyAdapter({ http2: true }), {
      logger: false,
      abortOnError: false,
    });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as AddressInfo;
    url = `http://127.0.0.1:${port}`;
  });
  afterAll(() => app.close());

  it('6 cancelled streams leave no slot held: the next 5 requests are admitted', async () => {
    const session = connect(url);
    session.on('error', () => undefined);
    try {
      for (let i = 0; i < 6; i++) {
        const stream = session.request({ ':path': '/h2/slot', 'x-cancel': '1' });
        stream.on('error', () => undefined);
        stream.resume();
        await pollUntil(() => Promise.resolve(reset.waiting === i + 1), 5000);
        stream.close(h2.NGHTTP2_CANCEL);
      }
      // Each decided once its client had left; each admitted handler then runs in its slot.
      expect(await pollUntil(() => Promise.resolve(reset.decided === 6), 5000)).toBe(true);
      await pollUntil(() => Promise.resolve(reset.ran === 6), 2000);
      const ranAfterReset = reset.ran;
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const stream = session.request({ ':path': '/h2/slot' });
        stream.resume();
        const [headers] = (await once(stream, 'response')) as [Record<string, unknown>];
        await once(stream, 'end');
        statuses.push(Number(headers[':status']));
      }
      expect({ ranAfterReset, next: statuses }).toEqual({
        ranAfterReset: 6,
        next: [200, 200, 200, 200, 200],
      });
      const service = app.get(RateLimitService);
      const policy: PolicyInput = {
        name: 'concurrent',
        concurrent: 2,
        scope: 'Http2Controller.slot',
      };
      expect(
        await pollUntil(
          async () => (await service.peek('h2-client', [policy])).policies[0]!.remaining === 2,
          5000,
        ),
      ).toBe(true);
    } finally {
      session.close();
    }
  });
});
