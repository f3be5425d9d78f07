/**
 * OpenTelemetry (issue 13, item 5): with `@opentelemetry/api` installed and an SDK registered
 * (a real `BasicTracerProvider` exporting to memory), each decision adds `ratelimit.*`
 * attributes to the span active during the guard, the identity hashed only; `tracing: false`
 * adds none; and the API is loaded only as the option says. The README recipe (a middleware
 * that makes a span active) runs as written, on Express and Fastify.
 */
import 'reflect-metadata';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Injectable, type NestMiddleware } from '@nestjs/common';
import {
  context,
  ROOT_CONTEXT,
  trace,
  type Context,
  type ContextManager,
} from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { RateLimit, RateLimitConfigError, type RateLimitModuleOptions } from '../../lib/index.js';
import { createResources } from '../../lib/nest/module/resources.js';
import { DecisionTracing } from '../../lib/nest/observability/tracing.js';
import { redisUrl } from '../harness/redis.js';
import {
  bootstrap,
  PLATFORMS,
  pollUntil,
  request,
  rootModule,
  uniquePrefix,
  type Platform,
} from './support/app.js';

const readme = readFileSync(new URL('../../docs/guides/observability.md', import.meta.url), 'utf8');

/** The README recipe, as the class below writes it (the first test checks the README holds it). */
const RECIPE = `@Injectable()
export class SpanMiddleware implements NestMiddleware {
  use(req: IncomingMessage, res: ServerResponse, next: () => void) {
    const span = trace.getTracer('api').startSpan('http.request');
    res.on('finish', () => span.end());
    context.with(trace.setSpan(context.active(), span), next);
  }
}`;

@Injectable()
export class SpanMiddleware implements NestMiddleware {
  use(req: IncomingMessage, res: ServerResponse, next: () => void) {
    const span = trace.getTracer('api').startSpan('http.request');
    res.on('finish', () => span.end());
    context.with(trace.setSpan(context.active(), span), next);
  }
}

/** What `@opentelemetry/context-async-hooks` does: the active context follows async calls. */
class AsyncLocalContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const run = (...args: unknown[]) =>
      this.with(ctx, () => (target as (...a: unknown[]) => unknown)(...args));
    return run as T;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}

@Controller('t')
class TracedController {
  @Get('two')
  @RateLimit('2/m')
  two() {
    return 'ok';
  }

  // `trial` would refuse from the 2nd request but is only watched.
  @Get('shadow')
  @RateLimit('1/m', { name: 'trial', shadow: true, scope: 'trials' })
  shadow() {
    return 'ok';
  }

  @Get('broken')
  @RateLimit('5/m', {
    failClosed: true,
    cost: () => {
      throw new Error('no cost today');
    },
  })
  broken() {
    return 'ok';
  }
}

const exporter = new InMemorySpanExporter();
const IDENTITY = createHash('sha256').update('ip:127.0.0.1').digest('base64url').slice(0, 12);

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalContextManager());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );
});
afterAll(() => {
  trace.disable();
  context.disable();
});

/** Starts an app whose every request runs in a span made active by the README middleware. */
async function tracedApp(platform: Platform, options: Partial<RateLimitModuleOptions>) {
  const module = rootModule(
    {
      redis: redisUrl(),
      prefix: uniquePrefix(),
      timeoutMs: 2000,
      algorithm: 'fixed-window',
      default: { rate: '100/m', name: 'api' },
      ...options,
    },
    [TracedController],
    [],
    SpanMiddleware,
  );
  const app = await bootstrap(platform, module);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  return { app, get: (path: string) => request(`${url}${path}`) };
}

/** Sends the requests one by one; the `ratelimit.*` attributes of each one's span, in order. */
async function attributesOf(get: (path: string) => Promise<{ status: number }>, paths: string[]) {
  exporter.reset();
  const statuses = [];
  for (const path of paths) statuses.push((await get(path)).status);
  // A span ends on the response's `finish`, which may come just after the client has read it.
  expect(
    await pollUntil(async () => exporter.getFinishedSpans().length === paths.length, 2000),
  ).toBe(true);
  const spans = exporter.getFinishedSpans();
  return {
    statuses,
    attributes: spans.map((s) =>
      Object.fromEntries(Object.entries(s.attributes).filter(([k]) => k.startsWith('ratelimit.'))),
    ),
    all: spans.map((s) => s.attributes),
  };
}

it('the docs holds the tracing recipe exactly as this suite runs it', () => {
  expect(readme).toContain(RECIPE);
  // Every attribute the suite sees is documented.
  for (const name of [
    'outcome',
    'identity_hash',
    'policy',
    'scope',
    'policies',
    'limit',
    'remaining',
    'retry_after_ms',
    'reason',
    'backend_error',
  ]) {
    expect(readme).toContain(`| \`ratelimit.${name}\``);
  }
});

describe.each(PLATFORMS)('OpenTelemetry span attributes on %s', (platform) => {
  let h: Awaited<ReturnType<typeof tracedApp>>;
  beforeAll(async () => {
    h = await tracedApp(platform, {});
  });
  afterAll(() => h?.app.close());

  it('each decision sets policy, scope, outcome, remaining and wait of the most restrictive policy, the identity hashed', async () => {
    const { statuses, attributes, all } = await attributesOf(h.get, ['/t/two', '/t/two', '/t/two']);
    expect(statuses).toEqual([200, 200, 429]);
    const two = (outcome: string, remaining: number) => ({
      'ratelimit.outcome': outcome,
      'ratelimit.identity_hash': IDENTITY,
      // Of the module's `api` (100/m) and the route's `default` (2/m), the route's is tighter.
      'ratelimit.policy': 'default',
      'ratelimit.scope': 'TracedController.two',
      'ratelimit.policies': ['api', 'default'],
      'ratelimit.limit': 2,
      'ratelimit.remaining': remaining,
      'ratelimit.retry_after_ms': outcome === 'blocked' ? expect.any(Number) : 0,
      ...(outcome === 'blocked' && { 'ratelimit.reason': 'limit_exceeded' }),
    });
    expect(attributes).toEqual([two('allowed', 1), two('allowed', 0), two('blocked', 0)]);
    // The refusal waits for the end of the one-minute window.
    const wait = attributes[2]!['ratelimit.retry_after_ms'] as number;
    expect(wait).toBeGreaterThan(50_000);
    expect(wait).toBeLessThanOrEqual(60_000);
    // The raw identity is in no attribute.
    expect(JSON.stringify(all)).not.toContain('127.0.0.1');
  });

  it('a shadow policy that would refuse shows as shadow_blocked, with its own scope', async () => {
    const { statuses, attributes } = await attributesOf(h.get, ['/t/shadow', '/t/shadow']);
    expect(statuses).toEqual([200, 200]);
    expect(attributes).toEqual([
      {
        'ratelimit.outcome': 'allowed',
        'ratelimit.identity_hash': IDENTITY,
        // Enforced policies only, when the request is admitted.
        'ratelimit.policy': 'api',
        'ratelimit.scope': 'global',
        'ratelimit.policies': ['api', 'trial'],
        'ratelimit.limit': 100,
        // 2 spent on /t/two (its refusal spent nothing), 1 here.
        'ratelimit.remaining': 97,
        'ratelimit.retry_after_ms': 0,
      },
      {
        'ratelimit.outcome': 'shadow_blocked',
        'ratelimit.identity_hash': IDENTITY,
        'ratelimit.policy': 'trial',
        'ratelimit.scope': 'trials',
        'ratelimit.policies': ['api', 'trial'],
        'ratelimit.limit': 1,
        'ratelimit.remaining': 0,
        'ratelimit.retry_after_ms': expect.any(Number),
      },
    ]);
  });

  it('a request refused without a decision shows failed_closed, and no numbers', async () => {
    const { statuses, attributes } = await attributesOf(h.get, ['/t/broken']);
    expect(statuses).toEqual([503]);
    expect(attributes).toEqual([
      { 'ratelimit.outcome': 'failed_closed', 'ratelimit.identity_hash': IDENTITY },
    ]);
  });
});

describe.each(PLATFORMS)('a store that does not answer, on %s', (platform) => {
  let h: Awaited<ReturnType<typeof tracedApp>>;
  beforeAll(async () => {
    // Nothing listens on port 1: every store call fails at once.
    h = await tracedApp(platform, { redis: 'redis://127.0.0.1:1', connectTimeoutMs: 0 });
  });
  afterAll(() => h?.app.close());

  it('shows failed_open, the policies attempted and the kind of failure', async () => {
    const { statuses, attributes } = await attributesOf(h.get, ['/t/two']);
    expect(statuses).toEqual([200]);
    expect(attributes).toEqual([
      {
        'ratelimit.outcome': 'failed_open',
        'ratelimit.identity_hash': IDENTITY,
        'ratelimit.policy': 'api',
        'ratelimit.scope': 'global',
        'ratelimit.policies': ['api', 'default'],
        'ratelimit.backend_error': 'unavailable',
      },
    ]);
  });
});

describe.each(PLATFORMS)('tracing: false on %s', (platform) => {
  let h: Awaited<ReturnType<typeof tracedApp>>;
  beforeAll(async () => {
    h = await tracedApp(platform, { tracing: false });
  });
  afterAll(() => h?.app.close());

  it('adds no attribute to the active span, and limits as before', async () => {
    const { statuses, all } = await attributesOf(h.get, ['/t/two', '/t/two', '/t/two']);
    expect(statuses).toEqual([200, 200, 429]);
    expect(all).toEqual([{}, {}, {}]);
  });
});

describe('loading @opentelemetry/api', () => {
  const quiet = { warn: () => undefined } as never;
  const missing = () => {
    const error = new Error("Cannot find package '@opentelemetry/api'") as Error & {
      code: string;
    };
    error.code = 'ERR_MODULE_NOT_FOUND';
    return Promise.reject(error);
  };

  it('is on by default when the API is installed, off when it is missing', async () => {
    const found = await createResources({ store: 'memory' }, quiet);
    expect(found.tracing).toBeInstanceOf(DecisionTracing);
    await found.store.close?.();
    const absent = await createResources({ store: 'memory' }, quiet, undefined, missing);
    expect(absent.tracing).toBeUndefined();
    await absent.store.close?.();
  });

  it('tracing: false never loads it', async () => {
    let loads = 0;
    const counting = () => {
      loads++;
      return missing();
    };
    const resources = await createResources(
      { store: 'memory', tracing: false },
      quiet,
      undefined,
      counting,
    );
    expect([resources.tracing, loads]).toEqual([undefined, 0]);
    await resources.store.close?.();
  });

  it('tracing: true fails the start with ERR_RATE_LIMIT_PEER_DEPENDENCY when it is missing, or older than 1.2', async () => {
    for (const [load, why] of [
      [missing, "Cannot find package '@opentelemetry/api'"],
      [() => Promise.resolve({ trace: {} }), 'it has no trace.getActiveSpan'],
    ] as const) {
      const failure = await createResources(
        { store: 'memory', tracing: true },
        quiet,
        undefined,
        load,
      ).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(RateLimitConfigError);
      expect(failure).toMatchObject({ code: 'ERR_RATE_LIMIT_PEER_DEPENDENCY' });
      expect((failure as Error).message).toContain(
        'tracing true needs the optional peer dependency @opentelemetry/api: install it (npm install @opentelemetry/api)',
      );
      expect((failure as Error).message).toContain(why);
    }
  });

  it('rejects a tracing option that is not a boolean', async () => {
    const failure = await createResources({ store: 'memory', tracing: 'on' as never }, quiet).catch(
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ code: 'ERR_RATE_LIMIT_OPTION' });
    expect((failure as Error).message).toContain('invalid tracing "on": expected a boolean');
  });

  it('outside a recording span there is nothing to annotate', () => {
    const tracing = new DecisionTracing(trace);
    expect(tracing.activeSpan()).toBeUndefined();
    const span = trace.getTracer('t').startSpan('outside');
    expect(context.with(trace.setSpan(context.active(), span), () => tracing.activeSpan())).toBe(
      span,
    );
    span.end();
    // Ended: no longer recording.
    expect(context.with(trace.setSpan(context.active(), span), () => tracing.activeSpan())).toBe(
      undefined,
    );
  });
});
