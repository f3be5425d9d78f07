/**
 * The drop-in's default tracker of a graphql-ws subscription takes the client address of the
 * connection's upgrade request as the app's platform would for an HTTP request: under the
 * app's proxy trust (Express `trust proxy`, Fastify `trustProxy`) the forwarded client, so the
 * clients behind one proxy are not pooled; without trust the socket's address, so a spoofed
 * `X-Forwarded-For` never buys a fresh budget. Apollo on Express, Mercurius on Fastify, real
 * graphql-ws clients over `ws`, the drop-in's in-memory storage. Mercurius hands the guard
 * Fastify's own request (its `ip` already trusts as configured); Apollo's graphql-ws context
 * holds the raw upgrade request, so the guard's tracker of that context is also checked on a
 * real upgrade request to each platform's server.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, Module, UseGuards, type INestApplication, type Type } from '@nestjs/common';
import type { IncomingMessage, Server } from 'node:http';
import { NestFactory } from '@nestjs/core';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { GraphQLModule, Int, Query, Resolver, Subscription } from '@nestjs/graphql';
import type { MercuriusDriverConfig } from '@nestjs/mercurius';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { createClient } from 'graphql-ws';
import WebSocket, { WebSocketServer } from 'ws';
import { ThrottlerGuard, ThrottlerModule } from '../../lib/throttler/index.js';
import { loadableMercurius } from './support/mercurius-interop.js';

await loadableMercurius();

@Resolver()
class Ticks {
  @Query(() => String)
  ping() {
    return 'pong';
  }

  @Subscription(() => Int)
  @UseGuards(ThrottlerGuard)
  ticks() {
    return (async function* () {
      yield { ticks: 1 };
    })();
  }
}

type Platform = 'express' | 'fastify';
/** `'loopback'`: the proxy on 127.0.0.1 is trusted; `false`: nothing is. */
type Trust = 'loopback' | false;

let app: INestApplication | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** `module` on the platform, with its own proxy trust setting (Express `trust proxy`, Fastify `trustProxy`). */
async function create(platform: Platform, trust: Trust, module: Type): Promise<INestApplication> {
  const settings = { logger: false as const, abortOnError: false };
  if (platform === 'fastify') {
    return NestFactory.create(module, new FastifyAdapter({ trustProxy: trust }), settings);
  }
  const express = await NestFactory.create<NestExpressApplication>(module, settings);
  express.set('trust proxy', trust);
  return express;
}

/** Apollo on Express or Mercurius on Fastify, `{ ttl: 60000, limit: 2 }`, on 127.0.0.1. */
async function start(platform: Platform, trust: Trust): Promise<string> {
  const graphql =
    platform === 'express'
      ? GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          autoSchemaFile: true,
          subscriptions: { 'graphql-ws': true },
        })
      : GraphQLModule.forRoot<MercuriusDriverConfig>({
          driver: (await import('@nestjs/mercurius')).MercuriusDriver,
          autoSchemaFile: true,
          subscription: true,
        });
  @Module({
    imports: [ThrottlerModule.forRoot([{ ttl: 60_000, limit: 2 }]), graphql],
    providers: [Ticks],
  })
  class App {}
  app = await create(platform, trust, App);
  await app.listen(0, '127.0.0.1');
  return (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
}

/**
 * One subscription from 127.0.0.1 (the proxy's address) whose upgrade request carries
 * `X-Forwarded-For: forwardedFor`: `data`, or the refusal's message.
 */
async function subscribeVia(url: string, forwardedFor: string): Promise<string> {
  class Proxied extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, { headers: { 'x-forwarded-for': forwardedFor } });
    }
  }
  const client = createClient({
    url: `${url.replace('http', 'ws')}/graphql`,
    webSocketImpl: Proxied,
    retryAttempts: 0,
  });
  try {
    return await new Promise<string>((resolve) => {
      const seen: string[] = [];
      client.subscribe(
        { query: 'subscription { ticks }' },
        {
          next: (value) => void seen.push(value.errors ? value.errors[0]!.message : 'data'),
          error: (error) => resolve(refusalOf(error)),
          complete: () => resolve(seen.join(',')),
        },
      );
    });
  } finally {
    await client.dispose();
  }
}

/** The message of an `error` callback's payload (graphql-ws gives the GraphQL errors). */
function refusalOf(error: unknown): string {
  if (Array.isArray(error)) return String((error[0] as { message?: unknown }).message);
  return String((error as { message?: unknown }).message ?? error);
}

const REFUSED = 'ThrottlerException: Too Many Requests';

/** Three subscriptions as 203.0.113.1, then one as 203.0.113.2, both through 127.0.0.1. */
async function twoClientsThroughOneProxy(url: string) {
  const first: string[] = [];
  for (let i = 0; i < 3; i++) first.push(await subscribeVia(url, '203.0.113.1'));
  return { '203.0.113.1': first, '203.0.113.2': [await subscribeVia(url, '203.0.113.2')] };
}

describe.each(['express', 'fastify'] as const)(
  'graphql-ws behind a proxy: the tracker is the address the platform gives an HTTP request (%s)',
  (platform) => {
    it("trust proxy 'loopback', { ttl: 60000, limit: 2 }: two clients through one proxy address with different X-Forwarded-For get budgets of their own (2 each), not one pooled under the proxy", async () => {
      const url = await start(platform, 'loopback');
      expect(await twoClientsThroughOneProxy(url)).toEqual({
        '203.0.113.1': ['data', 'data', REFUSED],
        '203.0.113.2': ['data'],
      });
    }, 60_000);

    it('no proxy trusted, { ttl: 60000, limit: 2 }: a spoofed X-Forwarded-For is ignored, both share the socket address 127.0.0.1 and its budget of 2', async () => {
      const url = await start(platform, false);
      expect(await twoClientsThroughOneProxy(url)).toEqual({
        '203.0.113.1': ['data', 'data', REFUSED],
        '203.0.113.2': [REFUSED],
      });
    }, 60_000);
  },
);

/** The guard's default tracker, for the test to call (a provider: Nest injects it). */
@Injectable()
class TrackerProbe extends ThrottlerGuard {
  trackerOf(req: Record<string, unknown>): Promise<string> {
    return this.getTracker(req);
  }
}

/**
 * The guard's tracker of a graphql-ws context (`{ extra: { request, socket } }`, as Apollo's
 * graphql-ws server gives it) for a real upgrade request to the app's server from 127.0.0.1
 * carrying `X-Forwarded-For: forwardedFor`.
 */
async function upgradeTracker(platform: Platform, trust: Trust, forwardedFor: string) {
  @Module({
    imports: [ThrottlerModule.forRoot([{ ttl: 60_000, limit: 2 }])],
    providers: [TrackerProbe],
  })
  class App {}
  app = await create(platform, trust, App);
  const probe = app.get(TrackerProbe);
  const server = new WebSocketServer({ server: app.getHttpServer() as Server, path: '/probe' });
  server.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    void probe.trackerOf({ extra: { request, socket } }).then((tracker) => socket.send(tracker));
  });
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  const client = new WebSocket(`${url.replace('http', 'ws')}/probe`, {
    headers: { 'x-forwarded-for': forwardedFor },
  });
  try {
    return await new Promise<string>((resolve, reject) => {
      client.once('message', (data: Buffer) => resolve(data.toString()));
      client.once('error', reject);
    });
  } finally {
    client.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe.each(['express', 'fastify'] as const)(
  "a graphql-ws context's upgrade request: the tracker is the platform's own `ip` (%s)",
  (platform) => {
    it("trust proxy 'loopback': X-Forwarded-For 203.0.113.1 through 127.0.0.1 is tracked as 203.0.113.1; 2001:db8:1:2::7 as its /64, 2001:db8:1:2::/64", async () => {
      expect(await upgradeTracker(platform, 'loopback', '203.0.113.1')).toBe('203.0.113.1');
      await app!.close();
      app = undefined;
      expect(await upgradeTracker(platform, 'loopback', '2001:db8:1:2::7')).toBe(
        '2001:db8:1:2::/64',
      );
    }, 60_000);

    it('no proxy trusted: a spoofed X-Forwarded-For 203.0.113.1 is ignored, tracked as the socket address 127.0.0.1', async () => {
      expect(await upgradeTracker(platform, false, '203.0.113.1')).toBe('127.0.0.1');
    }, 60_000);
  },
);
