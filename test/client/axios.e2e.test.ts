/**
 * The cooperative client's Axios interceptor (issue 24) in a Nest app that calls, through
 * `@nestjs/axios`'s HttpService, another Nest app that limits it (Express and Fastify).
 */
import 'reflect-metadata';
import type { IncomingMessage, Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { HttpModule, HttpService } from '@nestjs/axios';
import {
  Controller,
  Get,
  Injectable,
  Module,
  Post,
  Put,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { INestApplicationContext } from '@nestjs/common';
import axios from 'axios';
import { firstValueFrom } from 'rxjs';
import { RateLimit } from '../../lib/index.js';
import { RateLimitedError, type RetryEvent } from '../../lib/client/index.js';
import { rateLimitInterceptor } from '../../lib/client/axios-adapter.js';
import { createApp, PLATFORMS, type AppHandle } from '../e2e/support/app.js';

/** What the upstream answered, by status: the 429s it sent are counted there. */
let answered: number[] = [];
/** Every retry the caller's client announced. */
const retries: RetryEvent[] = [];
/** Requests that reached the `hourly` route, refused ones included (a middleware counts them). */
let hourlyHits = 0;

@Controller('upstream')
class UpstreamController {
  @Get('five')
  @RateLimit('5/s')
  five() {
    answered.push(200);
    return { ok: true };
  }

  @Post('orders')
  @RateLimit('1/h')
  order() {
    return { ok: true };
  }

  // One per 2 s: a second PUT right after the first is refused, and admitted after Retry-After.
  @Put('profile')
  @RateLimit('1/2s', { algorithm: 'fixed-window' })
  profile() {
    answered.push(200);
    return { saved: true };
  }

  @Get('hourly')
  @RateLimit('1/h')
  hourly() {
    return { ok: true };
  }
}

/** The caller's own service: the interceptor goes on in one line. */
@Injectable()
class UpstreamClient implements OnModuleInit, OnModuleDestroy {
  private eject?: () => void;
  constructor(readonly http: HttpService) {}
  onModuleInit() {
    this.eject = rateLimitInterceptor(this.http.axiosRef, {
      maxWaitMs: 10_000,
      jitterMs: 100,
      onRetry: (e) => retries.push(e),
    });
  }
  onModuleDestroy() {
    this.eject?.();
  }
}

// register(): an Axios instance of this module's own (plain HttpModule shares the global one).
@Module({ imports: [HttpModule.register({})], providers: [UpstreamClient] })
class CallerModule {}

describe.each(PLATFORMS)('rateLimitInterceptor on HttpService, calling a %s app', (platform) => {
  let upstream: AppHandle;
  let caller: INestApplicationContext;
  let client: UpstreamClient;
  beforeAll(async () => {
    upstream = await createApp(platform, { store: 'memory' }, [UpstreamController]);
    // Every request the server receives, before any guard: refused ones count too.
    (upstream.app.getHttpServer() as Server).on('request', (req: IncomingMessage) => {
      if (req.url?.startsWith('/upstream/hourly')) hourlyHits++;
    });
    caller = await NestFactory.createApplicationContext(CallerModule, { logger: false });
    client = caller.get(UpstreamClient);
  });
  afterAll(async () => {
    await caller?.close();
    await upstream?.close();
  });

  it('12 calls to a 5/s route all succeed, paced: 5 at once, then one per 200 ms', async () => {
    answered = [];
    const statuses: number[] = [];
    const started = performance.now();
    const replies = await Promise.all(
      Array.from({ length: 12 }, () =>
        firstValueFrom(client.http.get<{ ok: boolean }>(`${upstream.url}/upstream/five`)).then(
          (r) => {
            statuses.push(r.status);
            return r.data;
          },
        ),
      ),
    );
    expect(replies).toEqual(Array(12).fill({ ok: true }));
    expect(statuses).toEqual(Array(12).fill(200));
    expect(answered).toHaveLength(12);
    expect(performance.now() - started).toBeGreaterThanOrEqual(7 * 200 - 50);
  });

  it('a POST without an idempotency key is refused once and not sent again', async () => {
    const url = `${upstream.url}/upstream/orders`;
    expect((await firstValueFrom(client.http.post(url, {}))).status).toBe(201);
    const error = await firstValueFrom(client.http.post(url, {})).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitedError);
    expect((error as RateLimitedError).reason).toBe('not-idempotent');
    expect((error as RateLimitedError<{ status: number }>).response.status).toBe(429);
    // With a key, the hour's wait is beyond maxWaitMs: it gives up at once instead (pacing
    // does not spend the 10 s budget on a wait it cannot finish either).
    const started = performance.now();
    const keyed = await firstValueFrom(
      client.http.post(url, {}, { headers: { 'Idempotency-Key': 'o-1' } }),
    ).catch((e: unknown) => e);
    expect((keyed as RateLimitedError).reason).toBe('wait-too-long');
    // Well before the 10 s it may wait (one round trip; generous for a loaded machine).
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('a refused PUT is retried below the interceptors: one registered after it sees the answer once', async () => {
    answered = [];
    const seen: RetryEvent[] = [];
    const http = axios.create();
    // Pacing off, so that the second PUT meets the refusal instead of waiting it out.
    const eject = rateLimitInterceptor(http, {
      pacing: false,
      jitterMs: 100,
      onRetry: (e) => seen.push(e),
    });
    // Registered after rateLimitInterceptor, as an app's own interceptors usually are.
    http.interceptors.response.use((r) => r.data as never);
    try {
      const url = `${upstream.url}/upstream/profile`;
      const first = (await http.put(url, { name: 'a' })) as unknown;
      const second = (await http.put(url, { name: 'b' })) as unknown;
      expect(first).toEqual({ saved: true });
      expect(second).toEqual({ saved: true });
      expect(answered).toEqual([200, 200]);
      // The second was refused once and sent again.
      expect(seen.map((r) => [r.status, r.url.endsWith('/upstream/profile')])).toEqual([
        [429, true],
      ]);
    } finally {
      eject();
    }
  });

  it('installed twice, or on an instance made from one that has it, replaces rather than stacks', async () => {
    const url = `${upstream.url}/upstream/five`;
    const http = axios.create();
    const ejectFirst = rateLimitInterceptor(http);
    const ejectSecond = rateLimitInterceptor(http);
    expect((await http.get(url)).status).toBe(200);
    // The global instance, then one made from it with create(): it inherits the wrapper.
    const ejectGlobal = rateLimitInterceptor(axios);
    try {
      const child = axios.create();
      const ejectChild = rateLimitInterceptor(child);
      expect((await child.get(url)).status).toBe(200);
      ejectChild();
    } finally {
      ejectGlobal();
    }
    ejectFirst();
    ejectSecond();
    expect(typeof http.defaults.adapter).not.toBe('function');
    expect(typeof axios.defaults.adapter).not.toBe('function');
  });

  it('an abort during the wait rejects at once with Axios own CanceledError', async () => {
    const url = `${upstream.url}/upstream/hourly`;
    const http = axios.create();
    const eject = rateLimitInterceptor(http, { maxWaitMs: 7_200_000, pacing: false });
    try {
      await http.get(url);
      hourlyHits = 0;
      const controller = new AbortController();
      const started = performance.now();
      setTimeout(() => controller.abort(), 100);
      const error = await http.get(url, { signal: controller.signal }).catch((e: unknown) => e);
      expect(axios.isCancel(error)).toBe(true);
      // Long before the hour it was waiting (generous for a loaded machine).
      expect(performance.now() - started).toBeLessThan(10_000);
      // Refused once, then the wait was aborted: nothing was sent again.
      expect(hourlyHits).toBe(1);
    } finally {
      eject();
    }
  });
});
