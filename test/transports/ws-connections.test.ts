/**
 * Limits on new WebSocket connections (`RateLimitService.limitConnection`, issue 12, item 3),
 * and what a client receives when the store is down: fail-open admits, fail-closed refuses
 * with 503 and a wait of 1 s, for messages and connections alike.
 */
import 'reflect-metadata';
import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Inject } from '@nestjs/common';
import {
  MessageBody,
  SubscribeMessage,
  WebSocketGateway,
  type OnGatewayConnection,
} from '@nestjs/websockets';
import type { Redis } from 'ioredis';
import { RateLimit, RateLimitService } from '../../lib/index.js';
import { CapturingLogger, pollUntil } from '../e2e/support/app.js';
import {
  disconnect,
  newRedis,
  startRedisServer,
  type RedisServerHandle,
} from '../harness/redis.js';
import { createWsApp, sendTimes, WS_PLATFORMS, type WsAppHandle } from './support/ws-app.js';

/** A socket.io `Socket` (with its handshake) or a ws `WebSocket`. */
type Client = { handshake?: { headers: IncomingMessage['headers'] } };

/** `x-fail-closed: 1` in the handshake asks for a fail-closed connection limit. */
function failClosed(client: Client, request?: IncomingMessage): boolean {
  return (client.handshake?.headers ?? request?.headers)?.['x-fail-closed'] === '1';
}

@WebSocketGateway()
class LobbyGateway implements OnGatewayConnection {
  constructor(@Inject(RateLimitService) private readonly limits: RateLimitService) {}

  async handleConnection(client: Client, request?: IncomingMessage) {
    await this.limits.limitConnection(client, '3/m', {
      request,
      failClosed: failClosed(client, request),
    });
  }

  @SubscribeMessage('hello')
  hello() {
    return { event: 'welcome', data: 'hi' };
  }

  @SubscribeMessage('open')
  @RateLimit('3/m')
  open(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }

  @SubscribeMessage('closed')
  @RateLimit('3/m', { failClosed: true })
  closed(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }
}

const WELCOME = { event: 'welcome', data: 'hi' };
/** What a client receives for a refusal of a fail-closed policy whose store is down. */
const UNAVAILABLE = {
  event: 'exception',
  data: {
    status: 503,
    error: 'Service Unavailable',
    message: 'Rate limiting is unavailable; retry shortly',
    retryAfter: 1,
  },
};
/** How each platform reports a server-side disconnect for a 429 and for a 503. */
const CLOSED = {
  'socket.io': { 429: 'io server disconnect', 503: 'io server disconnect' },
  ws: { 429: '1008 Too Many Requests', 503: '1013 Service Unavailable' },
};

let redis: Redis;
beforeAll(() => {
  redis = newRedis();
});
afterAll(() => disconnect(redis));

describe.each(WS_PLATFORMS)('connection limits on %s', (platform) => {
  let h: WsAppHandle;
  beforeAll(async () => {
    h = await createWsApp(platform, { trustedProxies: 1 }, [LobbyGateway]);
  });
  afterAll(() => h?.close());

  const from = (ip: string) => h.connect({ headers: { 'x-forwarded-for': ip } });

  it('the 4th connection within a minute from one IP is told the wait and disconnected', async () => {
    for (let i = 0; i < 3; i++)
      expect(await (await from('203.0.113.20')).send('hello')).toEqual(WELCOME);
    const fourth = await from('203.0.113.20');
    expect(await fourth.next()).toEqual({
      event: 'exception',
      data: {
        status: 429,
        error: 'Too Many Requests',
        message: 'Too many requests; retry in 20 s',
        retryAfter: 20,
      },
    });
    expect(await fourth.closed).toEqual({ reason: CLOSED[platform][429] });
    // Another address has its own budget.
    expect(await (await from('203.0.113.21')).send('hello')).toEqual(WELCOME);
    expect((await redis.keys(`${h.prefix}:{ip:*`)).sort()).toEqual([
      `${h.prefix}:{ip:203.0.113.20}:connection:connection:tb`,
      `${h.prefix}:{ip:203.0.113.21}:connection:connection:tb`,
    ]);
  });

  it('an invalid rate throws RateLimitConfigError from limitConnection, naming it', async () => {
    const limits = h.app.get(RateLimitService);
    await expect(limits.limitConnection({}, '3/x')).rejects.toMatchObject({
      name: 'RateLimitConfigError',
      message: expect.stringContaining('RateLimitService.limitConnection'),
    });
  });
});

describe.each(WS_PLATFORMS)('Redis stopped, on %s', (platform) => {
  const logger = new CapturingLogger();
  let server: RedisServerHandle;
  let h: WsAppHandle;
  beforeAll(async () => {
    server = await startRedisServer();
    h = await createWsApp(
      platform,
      {
        redis: server.url,
        timeoutMs: 100,
        circuitBreaker: { failureThreshold: 2, cooldownMs: 200 },
      },
      [LobbyGateway],
      {
        logger,
      },
    );
  });
  afterAll(async () => {
    await h?.close();
    await server?.kill();
  });

  it('fail-open messages are answered; fail-closed ones refused with status 503 and a wait of 1 s', async () => {
    const client = await h.connect();
    expect(await client.send('closed', 1)).toEqual({ event: 'pong', data: 1 });
    await server.kill();
    expect(await sendTimes(client, 2, 'open')).toEqual([
      { event: 'pong', data: 1 },
      { event: 'pong', data: 2 },
    ]);
    expect(await client.send('closed', 2)).toEqual(UNAVAILABLE);
  });

  it('a connection is admitted, or refused with 503 and disconnected when fail-closed', async () => {
    logger.clear();
    const admitted = await h.connect();
    expect(await admitted.send('hello')).toEqual(WELCOME);
    const refused = await h.connect({ headers: { 'x-fail-closed': '1' } });
    expect(await refused.next()).toEqual(UNAVAILABLE);
    expect(await refused.closed).toEqual({ reason: CLOSED[platform][503] });
    // One events object per module: the message handlers met this error kind just before
    // (its line is written), so the connections' failures are counted into its next line
    // rather than written again within 10 s.
    expect(logger.matching('rate_limit.backend_error')).toEqual([]);
  });

  it('after a restart, limiting resumes by itself', async () => {
    await server.restart();
    // Bounded poll: the client reconnects and the circuit breaker probes after its cool-down.
    const polling = await h.connect();
    let n = 0;
    const back = await pollUntil(
      async () => (await polling.send('closed', ++n)).event === 'pong',
      5000,
    );
    expect(back).toBe(true);
    const socket = await h.connect({ headers: { 'x-fail-closed': '1' } });
    expect(await socket.send('hello')).toEqual(WELCOME);
  });
});

describe('connection limits in shadow mode', () => {
  const logger = new CapturingLogger();
  let h: WsAppHandle;
  beforeAll(async () => {
    h = await createWsApp('socket.io', { mode: 'shadow' }, [LobbyGateway], { logger });
  });
  afterAll(() => h?.close());

  it('admit the 4th connection and log rate_limit.shadow_blocked', async () => {
    for (let i = 0; i < 4; i++) expect(await (await h.connect()).send('hello')).toEqual(WELCOME);
    // Messages are answered while handleConnection still awaits its limit: wait for its line.
    const logged = () => logger.matching('rate_limit.shadow_blocked').length > 0;
    expect(await pollUntil(async () => logged(), 5000)).toBe(true);
    expect(logger.matching('rate_limit.shadow_blocked')).toEqual([
      expect.stringMatching(/"route":"connection".*"policy":"connection"/),
    ]);
  });
});

describe('connection limits with the allow-list and an enabled function', () => {
  const logger = new CapturingLogger();
  let h: WsAppHandle;
  /** What the flag service answers; `stalled` never answers. */
  let flag: 'on' | 'stalled' = 'on';
  beforeAll(async () => {
    h = await createWsApp(
      'socket.io',
      {
        trustedProxies: 1,
        allowList: ['198.51.100.0/24'],
        enabled: () => (flag === 'on' ? Promise.resolve(true) : new Promise<boolean>(() => {})),
      },
      [LobbyGateway],
      { logger },
    );
  });
  afterAll(() => h?.close());

  const from = (ip: string) => h.connect({ headers: { 'x-forwarded-for': ip } });

  it('an address on the allow-list is never refused a connection, and spends nothing', async () => {
    for (let i = 0; i < 5; i++)
      expect(await (await from('198.51.100.7')).send('hello')).toEqual(WELCOME);
    expect(await redis.keys(`${h.prefix}:{ip:198.51.100.7}*`)).toEqual([]);
    // Off the list, the limit applies: 3 per minute.
    for (let i = 0; i < 3; i++)
      expect(await (await from('203.0.113.30')).send('hello')).toEqual(WELCOME);
    const fourth = await from('203.0.113.30');
    expect(await fourth.next()).toMatchObject({ event: 'exception', data: { status: 429 } });
  });

  it('a stalled enabled function holds a connection 100 ms at most, then its last answer applies', async () => {
    flag = 'stalled';
    for (let i = 0; i < 3; i++)
      expect(await (await from('203.0.113.31')).send('hello')).toEqual(WELCOME);
    // The last answer was "on": the 4th connection is still limited, not left hanging.
    const fourth = await from('203.0.113.31');
    expect(await fourth.next()).toMatchObject({ event: 'exception', data: { status: 429 } });
    expect(await fourth.closed).toEqual({ reason: CLOSED['socket.io'][429] });
    flag = 'on';
  });
});

/** `x-store-failure: local | closed` asks for that failure mode; without it, the module's. */
@WebSocketGateway()
class StoreFailureGateway implements OnGatewayConnection {
  constructor(@Inject(RateLimitService) private readonly limits: RateLimitService) {}

  async handleConnection(client: Client, request?: IncomingMessage) {
    const asked = (client.handshake?.headers ?? request?.headers)?.['x-store-failure'];
    // A fixed set of scopes: never one per value a client sends.
    const mode = asked === 'local' || asked === 'closed' ? asked : undefined;
    await this.limits.limitConnection(client, '2/m', {
      request,
      scope: `lobby-${mode ?? 'module'}`,
      ...(mode !== undefined && { onStoreFailure: mode }),
    });
  }

  @SubscribeMessage('hello')
  hello() {
    return { event: 'welcome', data: 'hi' };
  }
}

describe.each(WS_PLATFORMS)('connection limits while Redis is down, on %s', (platform) => {
  const logger = new CapturingLogger();
  let server: RedisServerHandle;
  let h: WsAppHandle;
  beforeAll(async () => {
    server = await startRedisServer();
    // The module's failure mode is closed; a connection limit may name its own, as a route's
    // policy does.
    h = await createWsApp(
      platform,
      { redis: server.url, timeoutMs: 100, instances: 1, onStoreFailure: 'closed' },
      [StoreFailureGateway],
      { logger },
    );
    await server.kill();
  });
  afterAll(async () => {
    await h?.close();
    await server?.kill();
  });

  const connect = (mode?: string) =>
    h.connect({ headers: mode === undefined ? {} : { 'x-store-failure': mode } });

  it("onStoreFailure: 'local' enforces the limit in memory: 2 admitted, the 3rd told the wait", async () => {
    for (let i = 0; i < 2; i++)
      expect(await (await connect('local')).send('hello')).toEqual(WELCOME);
    const third = await connect('local');
    const refused = (await third.next()) as {
      event: string;
      data: { status: number; retryAfter: number };
    };
    expect(refused.event).toBe('exception');
    expect(refused.data.status).toBe(429);
    // The local share of 2/m is 2 with one instance: the next token comes within 30 s.
    expect(refused.data.retryAfter).toBeGreaterThanOrEqual(29);
    expect(refused.data.retryAfter).toBeLessThanOrEqual(30);
    expect(await third.closed).toEqual({ reason: CLOSED[platform][429] });
    // The module's first store failure: logged, for the connection limit's scope.
    expect(logger.matching('rate_limit.backend_error')).toEqual([
      expect.stringContaining('"route":"lobby-local"'),
    ]);
  });

  it("the module's onStoreFailure: 'closed' applies to connection limits: refused with 503", async () => {
    const refused = await connect();
    expect(await refused.next()).toEqual(UNAVAILABLE);
    expect(await refused.closed).toEqual({ reason: CLOSED[platform][503] });
  });

  it("onStoreFailure: 'closed' on the call refuses with 503 too", async () => {
    const refused = await connect('closed');
    expect(((await refused.next()) as { data: { status: number } }).data.status).toBe(503);
    expect(await refused.closed).toEqual({ reason: CLOSED[platform][503] });
  });
});
