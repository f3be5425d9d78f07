/**
 * The README's WebSocket recipes, as written (issue 12, item 3): the socket.io gateway and the
 * ws `handleConnection`, run against real clients. The README's code must appear in this file
 * verbatim (indentation aside), so the two cannot drift apart.
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  MessageBody,
  SubscribeMessage,
  WebSocketGateway,
  type OnGatewayConnection,
} from '@nestjs/websockets';
import type { Socket } from 'socket.io';
import type { WebSocket } from 'ws';
import { RateLimit, RateLimitService, rateLimitContext } from '../../lib/index.js';
import { createWsApp, sendTimes, type WsAppHandle } from './support/ws-app.js';

/** The app's own authentication: a token (or an Authorization header) names the user. */
@Injectable()
class Sessions {
  async userOf(token: unknown): Promise<{ id: string } | undefined> {
    return typeof token === 'string' ? { id: token } : undefined;
  }
}

@WebSocketGateway()
@RateLimit('30/m')
export class ChatGateway implements OnGatewayConnection {
  constructor(
    private readonly limits: RateLimitService,
    private readonly sessions: Sessions,
  ) {}

  async handleConnection(client: Socket) {
    if (!(await this.limits.limitConnection(client, '10/m'))) return;
    client.data.user = await this.sessions.userOf(client.handshake.auth.token);
    client.emit('ready');
  }

  @SubscribeMessage('ping')
  ping(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }

  @SubscribeMessage('upload')
  @RateLimit('100/m', { cost: (ctx) => rateLimitContext(ctx).args?.files?.length ?? 1 })
  upload(@MessageBody() body: { files: string[] }) {
    return { event: 'uploaded', data: body.files.length };
  }
}

/** The same gateway on ws, with the README's ws `handleConnection`. */
@WebSocketGateway()
@RateLimit('30/m')
class WsChatGateway implements OnGatewayConnection {
  constructor(
    private readonly limits: RateLimitService,
    private readonly sessions: Sessions,
  ) {}

  async handleConnection(client: WebSocket & { user?: unknown }, request: IncomingMessage) {
    if (!(await this.limits.limitConnection(client, '10/m', { request }))) return;
    client.user = await this.sessions.userOf(request.headers.authorization);
    client.send(JSON.stringify({ event: 'ready' }));
  }

  @SubscribeMessage('ping')
  ping(@MessageBody() n: number) {
    return { event: 'pong', data: n };
  }
}

/** The TypeScript blocks of the README's WebSocket section. */
function readmeBlocks(): string[] {
  const readme = readFileSync(new URL('../../docs/guides/websockets.md', import.meta.url), 'utf8');
  const section = readme.slice(
    readme.indexOf('# WebSockets (socket.io, ws)'),
    readme.indexOf('The WebSocket part ends here.'),
  );
  return [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** `text` as trimmed, non-empty lines. */
const linesOf = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

describe('the docs WebSocket recipes', () => {
  it('are in this file as written, from the gateway on (imports name the package)', () => {
    const source = linesOf(readFileSync(new URL(import.meta.url), 'utf8')).join('\n');
    const blocks = readmeBlocks();
    expect(blocks).toHaveLength(2);
    for (const block of blocks) {
      const lines = linesOf(block);
      const from = Math.max(0, lines.indexOf('@WebSocketGateway()'));
      expect(source).toContain(lines.slice(from).join('\n'));
    }
  });
});

describe('the socket.io recipe', () => {
  let h: WsAppHandle;
  beforeAll(async () => {
    h = await createWsApp('socket.io', {}, [ChatGateway], { providers: [Sessions] });
  });
  afterAll(() => h?.close());

  /** Connects as `token` and waits for the gateway's `ready`. */
  async function ready(token: string) {
    const client = await h.connect({ token });
    expect(await client.next()).toEqual({ event: 'ready' });
    return client;
  }

  it('30 messages a minute per user, uploads costed by their files', async () => {
    const ann = await ready('ann');
    const replies = await sendTimes(ann, 31, 'ping');
    expect(replies.slice(0, 30)).toEqual(
      Array.from({ length: 30 }, (_, i) => ({ event: 'pong', data: i + 1 })),
    );
    expect(replies[30]).toEqual({
      event: 'exception',
      data: {
        status: 429,
        error: 'Too Many Requests',
        message: 'Too many requests; retry in 2 s',
        retryAfter: 2,
      },
    });
    // Another user has a budget of its own; 60 files cost 60 of 100.
    const ben = await ready('ben');
    expect(await ben.send('ping', 1)).toEqual({ event: 'pong', data: 1 });
    const files = (n: number) => ({ files: new Array<string>(n).fill('f') });
    expect(await ben.send('upload', files(60))).toEqual({ event: 'uploaded', data: 60 });
    expect(await ben.send('upload', files(41))).toMatchObject({
      event: 'exception',
      data: { status: 429 },
    });
    expect(await ben.send('upload', files(40))).toEqual({ event: 'uploaded', data: 40 });
  });

  it('10 connection attempts a minute per IP: the 11th is told the wait and disconnected', async () => {
    // Two connections above; eight more are admitted.
    for (let i = 0; i < 8; i++) {
      expect(await (await ready(`c${i}`)).send('ping', i)).toEqual({ event: 'pong', data: i });
    }
    const eleventh = await h.connect({ token: 'c8' });
    const refusal = (await eleventh.next()) as { data: { retryAfter: number } };
    // 10/m frees one connection every 6 s, counted from the first: at most 6 s to wait.
    const wait = refusal.data.retryAfter;
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(6);
    expect(refusal).toEqual({
      event: 'exception',
      data: {
        status: 429,
        error: 'Too Many Requests',
        message: `Too many requests; retry in ${wait} s`,
        retryAfter: wait,
      },
    });
    expect(await eleventh.closed).toEqual({ reason: 'io server disconnect' });
  });
});

describe('the ws recipe', () => {
  let h: WsAppHandle;
  beforeAll(async () => {
    h = await createWsApp('ws', { trustedProxies: 1 }, [WsChatGateway], { providers: [Sessions] });
  });
  afterAll(() => h?.close());

  it('the user from the upgrade request, and connections per forwarded IP', async () => {
    const headers = (user: string, ip: string) => ({ authorization: user, 'x-forwarded-for': ip });
    const ready = async (user: string, ip: string) => {
      const client = await h.connect({ headers: headers(user, ip) });
      expect(await client.next()).toEqual({ event: 'ready' });
      return client;
    };
    const ann = await ready('ann', '203.0.113.40');
    const replies = await sendTimes(ann, 31, 'ping');
    expect(replies[29]).toEqual({ event: 'pong', data: 30 });
    expect(replies[30]).toMatchObject({ event: 'exception', data: { status: 429, retryAfter: 2 } });
    for (let i = 0; i < 9; i++) await ready(`u${i}`, '203.0.113.40');
    const eleventh = await h.connect({ headers: headers('late', '203.0.113.40') });
    expect(await eleventh.next()).toMatchObject({ event: 'exception', data: { status: 429 } });
    expect(await eleventh.closed).toEqual({ reason: '1008 Too Many Requests' });
    // Another forwarded address connects, and is its own user.
    const other = await ready('ann2', '203.0.113.41');
    expect(await other.send('ping', 1)).toEqual({ event: 'pong', data: 1 });
  });
});
