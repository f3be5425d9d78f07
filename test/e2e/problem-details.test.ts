/**
 * HTTP refusals as RFC 9457 problem details (issue 12, item 6): with `errorFormat: 'problem'`
 * a 429 is `application/problem+json` of type `quota-exceeded` with `violated-policies`, a 503
 * of type `temporary-reduced-capacity`; the headers are those of the default format, which
 * stays Nest's body. On Express and Fastify, and (through `npm run test:nest11`) on every Nest
 * major we support: Nest 11's Express adapter rewrites a non-JSON Content-Type on error bodies.
 */
import 'reflect-metadata';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimit, RateLimitConfigError, type RateLimitModuleOptions } from '../../lib/index.js';
import { disconnect, startRedisServer, type RedisServerHandle } from '../harness/redis.js';
import { thrown } from '../support/thrown.js';
import { validateOptions } from '../../lib/nest/module/validate-options.js';
import { CapturingLogger, createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
const REDUCED_CAPACITY =
  'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';

@Controller('problem')
class ProblemController {
  @Get('quota')
  @RateLimit('2/m')
  quota() {
    return 'ok';
  }

  @Get('stacked')
  @RateLimit('1/m', { name: 'burst' })
  @RateLimit('1/h', { name: 'hourly' })
  stacked() {
    return 'ok';
  }

  @Get('login')
  @RateLimit('1/m', { exposeDetails: false })
  login() {
    return 'ok';
  }

  @Get('closed')
  @RateLimit('5/m', { failClosed: true })
  closed() {
    return 'ok';
  }
}

/**
 * The members RFC 9457 §3.1 defines, with the types it gives them, plus this problem type's
 * extensions (§3.2): nothing else.
 */
function expectProblemMembers(body: Record<string, unknown>, status: number): void {
  expect(typeof body.type).toBe('string');
  expect(new URL(body.type as string).protocol).toBe('https:');
  expect(typeof body.title).toBe('string');
  expect(body.status).toBe(status);
  expect(typeof body.detail).toBe('string');
  for (const member of Object.keys(body))
    expect(['type', 'title', 'status', 'detail', 'violated-policies', 'retryAfter']).toContain(
      member,
    );
}

describe.each(PLATFORMS)("errorFormat: 'problem' on %s", (platform) => {
  const logger = new CapturingLogger();
  let server: RedisServerHandle;
  let client: Redis;
  let h: AppHandle;
  beforeAll(async () => {
    // A Redis of this suite's own, stopped for the 503; the client is ours, never retrying.
    server = await startRedisServer();
    client = new Redis(server.url, {
      autoResendUnfulfilledCommands: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    await once(client, 'ready');
    h = await createApp(platform, { redis: client, errorFormat: 'problem' }, [ProblemController], {
      logger,
    });
  });
  afterAll(async () => {
    await h?.close();
    disconnect(client);
    await server?.kill();
  });

  it('a 429 is application/problem+json of type quota-exceeded, with the same headers', async () => {
    const replies = await times(3, () => h.get('/problem/quota'));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
    const refused = replies[2]!;
    expect(refused.headers.get('content-type')).toBe('application/problem+json');
    expect(refused.body).toEqual({
      type: QUOTA_EXCEEDED,
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      detail: 'Too many requests; retry in 30 s',
      'violated-policies': ['default'],
      retryAfter: 30,
    });
    expectProblemMembers(refused.body as Record<string, unknown>, 429);
    expect(refused.headers.get('retry-after')).toBe('30');
    expect(refused.rl).toEqual({
      'x-ratelimit-limit': '2',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '30',
      'ratelimit-policy': '"default";q=2;w=60',
      ratelimit: '"default";r=0;t=30',
    });
    // Nest's adapters leave the type alone: no "Content-Type doesn't match" warning.
    expect(logger.matching("Content-Type doesn't match")).toEqual([]);
  });

  it('violated-policies names every policy that refused', async () => {
    await h.get('/problem/stacked');
    const refused = await h.get('/problem/stacked');
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ 'violated-policies': ['burst', 'hourly'] });
  });

  it('exposeDetails: false leaves the wait out, as in the Nest body', async () => {
    await h.get('/problem/login');
    const refused = await h.get('/problem/login');
    expect(refused.body).toEqual({
      type: QUOTA_EXCEEDED,
      title: 'Request cannot be satisfied as assigned quota has been exceeded',
      status: 429,
      detail: 'Too many requests',
      'violated-policies': ['default'],
    });
    expect(refused.headers.get('retry-after')).toBe('60');
  });

  it('a fail-closed 503 is of type temporary-reduced-capacity', async () => {
    await server.kill();
    const refused = await h.get('/problem/closed');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('content-type')).toBe('application/problem+json');
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.body).toEqual({
      type: REDUCED_CAPACITY,
      title: 'Request cannot be satisfied due to temporary server capacity constraints',
      status: 503,
      detail: 'Rate limiting is unavailable; retry shortly',
      retryAfter: 1,
    });
    expectProblemMembers(refused.body as Record<string, unknown>, 503);
  });
});

describe.each(PLATFORMS)('the default errorFormat on %s', (platform) => {
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(platform, {}, [ProblemController]);
  });
  afterAll(() => h?.close());

  it("stays Nest's body, as JSON", async () => {
    const replies = await times(3, () => h.get('/problem/quota'));
    const refused = replies[2]!;
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^application\/json\b/);
    expect(refused.body).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: 'Too many requests; retry in 30 s',
      retryAfter: 30,
    });
  });
});

it('an unknown errorFormat fails at bootstrap with ERR_RATE_LIMIT_OPTION, quoting it', () => {
  const error = thrown(() =>
    validateOptions({ errorFormat: 'rfc7807' } as unknown as RateLimitModuleOptions),
  );
  expect(error).toBeInstanceOf(RateLimitConfigError);
  expect((error as RateLimitConfigError).code).toBe('ERR_RATE_LIMIT_OPTION');
  expect((error as RateLimitConfigError).message).toMatch(
    /invalid errorFormat "rfc7807": expected 'nest' or 'problem'/,
  );
});
