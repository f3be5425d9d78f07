/**
 * The guard through the transport adapters (issue 12, item 1): a context of any shape gets
 * an answer, never a TypeError; the carrier makes a call guarded twice count once; the
 * user-function helper answers on every context.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, HttpException, type ExecutionContext } from '@nestjs/common';
import { keys, RateLimit, RateLimitGuard, rateLimitContext } from '../../lib/index.js';
import { CapturingLogger, createApp, type AppHandle } from './support/app.js';

@Controller('shapes')
class ShapesController {
  @Get('by-ip')
  @RateLimit('2/m')
  byIp() {
    return 'ok';
  }

  @Get('by-key')
  @RateLimit('2/m', { key: keys.header('x-api-key') })
  byKey() {
    return 'ok';
  }
}

/** The class and handler a context names. */
const BY_IP = { controller: ShapesController, handler: ShapesController.prototype.byIp };
const BY_KEY = { controller: ShapesController, handler: ShapesController.prototype.byKey };

/** An ExecutionContext of `type` holding `args`; a transport reading it through `switchTo*` fails the test. */
function contextOf(
  type: string,
  args: unknown[],
  { controller, handler }: { controller?: unknown; handler?: unknown } = BY_IP,
): ExecutionContext {
  const forbidden = () => {
    throw new Error('read through switchTo*: only getArgByIndex is expected');
  };
  return {
    getType: () => type,
    getClass: () => controller,
    getHandler: () => handler,
    getArgs: () => args,
    getArgByIndex: (i: number) => args[i],
    switchToHttp: forbidden,
    switchToRpc: forbidden,
    switchToWs: forbidden,
  } as unknown as ExecutionContext;
}

/** An Express-like response that keeps the headers set on it. */
function response(): { headers: Record<string, string>; setHeader(n: string, v: string): void } {
  const headers: Record<string, string> = {};
  return { headers, setHeader: (name, value) => void (headers[name.toLowerCase()] = value) };
}

async function statusOf(attempt: Promise<boolean>): Promise<number | boolean> {
  try {
    return await attempt;
  } catch (error) {
    if (error instanceof HttpException) return error.getStatus();
    throw error;
  }
}

describe('the guard on contexts of every shape', () => {
  const logger = new CapturingLogger();
  let h: AppHandle;
  let guard: RateLimitGuard;
  beforeAll(async () => {
    // trustedProxies makes the address lookup read headers, which these requests lack.
    h = await createApp('express', { trustedProxies: 1 }, [ShapesController], { logger });
    guard = h.app.get(RateLimitGuard);
  });
  afterAll(() => h?.close());

  it('an HTTP request with no headers, address or response is limited, as ip:unknown', async () => {
    const outcomes = [];
    for (let i = 0; i < 3; i++)
      outcomes.push(await statusOf(guard.canActivate(contextOf('http', [{}]))));
    expect(outcomes).toEqual([true, true, 429]);
  });

  it('a header key over a request without headers falls back to the address', async () => {
    const outcomes = [];
    for (let i = 0; i < 3; i++) {
      const ctx = contextOf('http', [{ ip: '203.0.113.9' }], BY_KEY);
      outcomes.push(await statusOf(guard.canActivate(ctx)));
    }
    expect(outcomes).toEqual([true, true, 429]);
  });

  it('an HTTP context whose arguments are no request passes untouched', async () => {
    for (const args of [[], [undefined], [null], ['text', 42]]) {
      for (let i = 0; i < 3; i++)
        await expect(guard.canActivate(contextOf('http', args))).resolves.toBe(true);
    }
  });

  it('a context without class or handler is admitted and logged, not a TypeError', async () => {
    logger.clear();
    const ctx = contextOf('http', [{ ip: '203.0.113.10', headers: {} }], {});
    await expect(guard.canActivate(ctx)).resolves.toBe(true);
    expect(logger.matching('rate_limit.config_error')).toEqual([
      expect.stringContaining('"route":"transport http"'),
    ]);
  });

  it('a request guarded twice counts once: the outcome lives on the request', async () => {
    const request = { ip: '203.0.113.11', headers: {} };
    const first = response();
    await expect(guard.canActivate(contextOf('http', [request, first]))).resolves.toBe(true);
    expect(first.headers['x-ratelimit-remaining']).toBe('1');
    const again = response();
    await expect(guard.canActivate(contextOf('http', [request, again]))).resolves.toBe(true);
    expect(again.headers).toEqual({});
    const next = response();
    const another = { ip: '203.0.113.11', headers: {} };
    await expect(guard.canActivate(contextOf('http', [another, next]))).resolves.toBe(true);
    expect(next.headers['x-ratelimit-remaining']).toBe('0');
  });

  it('a refusal carries its headers on the response and the 429 body', async () => {
    const request = () => ({ ip: '203.0.113.12', headers: {} });
    await guard.canActivate(contextOf('http', [request(), response()]));
    await guard.canActivate(contextOf('http', [request(), response()]));
    const refused = response();
    const error = await guard.canActivate(contextOf('http', [request(), refused])).catch((e) => e);
    expect(error).toBeInstanceOf(HttpException);
    expect((error as HttpException).getStatus()).toBe(429);
    expect((error as HttpException).getResponse()).toMatchObject({
      statusCode: 429,
      error: 'Too Many Requests',
    });
    expect(refused.headers['x-ratelimit-remaining']).toBe('0');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });
});

describe('rateLimitContext', () => {
  it('on HTTP: the request, its user, else the user on the raw request (Fastify middleware)', () => {
    const express = { headers: {}, user: { id: 'e' } };
    expect(rateLimitContext(contextOf('http', [express]))).toEqual({
      transport: 'http',
      request: express,
      user: { id: 'e' },
      args: undefined,
    });
    const fastify = { headers: {}, raw: { user: { id: 'f' } } };
    expect(rateLimitContext(contextOf('http', [fastify])).user).toEqual({ id: 'f' });
  });

  it.each(['kafka', 'kafka-streams'])(
    'on a %s context without an adapter: nothing, and nothing read',
    (type) => {
      expect(rateLimitContext(contextOf(type, [{ headers: {} }, {}]))).toEqual({
        transport: type,
        request: undefined,
        user: undefined,
        args: undefined,
      });
    },
  );
});
