/**
 * Real GraphQL apps for the transport tests: Apollo on Express and Mercurius on Fastify, each
 * with RateLimitModule on the shared test Redis, listening on 127.0.0.1; a client for
 * GraphQL over HTTP (fetch) and one for subscriptions (graphql-ws over `ws`).
 */
import 'reflect-metadata';
import {
  Module,
  type INestApplication,
  type LoggerService,
  type Provider,
  type Type,
} from '@nestjs/common';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { GraphQLModule } from '@nestjs/graphql';
import type { MercuriusDriverConfig } from '@nestjs/mercurius';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { RateLimitModule, type RateLimitModuleOptions } from '../../../lib/index.js';
import { redisUrl } from '../../harness/redis.js';
import { bootstrap, uniquePrefix } from '../../e2e/support/app.js';
import { loadableMercurius } from './mercurius-interop.js';

// Before any app starts: @nestjs/mercurius is imported below, once Mercurius can be.
await loadableMercurius();

/** The two stacks of the acceptance: Apollo on Express, Mercurius on Fastify. */
export type GraphQLServer = 'apollo' | 'mercurius';
export const SERVERS: GraphQLServer[] = ['apollo', 'mercurius'];

export interface GraphQLAppOptions {
  /** Module options besides the Redis, the prefix and a generous `timeoutMs`. */
  rateLimit?: RateLimitModuleOptions;
  /** Resolver classes (and other providers). */
  providers: Provider[];
  /** GraphQLModule options merged over the defaults (code-first, `autoSchemaFile: true`). */
  graphql?: Partial<ApolloDriverConfig> & Partial<MercuriusDriverConfig>;
  logger?: LoggerService | false;
  /**
   * Sets `request.user = { id }` from the `x-user` header before GraphQL runs (an Express
   * middleware, a Fastify `onRequest` hook), as authentication middleware would.
   */
  userFromHeader?: boolean;
}

export interface GraphQLApp {
  app: INestApplication;
  /** `http://127.0.0.1:<port>` */
  url: string;
  prefix: string;
  /** POSTs one operation to `/graphql`. */
  query(query: string, headers?: Record<string, string>): Promise<GraphQLReply>;
  /** A graphql-ws client on `/graphql`; closed by {@link GraphQLApp.close}. */
  subscriptions(connectionParams?: Record<string, unknown>): Client;
  close(): Promise<void>;
}

interface GraphQLError {
  message: string;
  path?: (string | number)[];
  extensions?: Record<string, unknown>;
}

export interface GraphQLReply {
  status: number;
  headers: Headers;
  data: Record<string, unknown> | null | undefined;
  errors: GraphQLError[] | undefined;
}

/** Boots a GraphQL app on `server`'s stack, listening on 127.0.0.1:0. */
export async function createGraphQLApp(
  server: GraphQLServer,
  options: GraphQLAppOptions,
): Promise<GraphQLApp> {
  const prefix = options.rateLimit?.prefix ?? uniquePrefix();
  const rateLimit: RateLimitModuleOptions = {
    redis: redisUrl(),
    timeoutMs: 2000,
    ...options.rateLimit,
    prefix,
  };
  const graphql =
    server === 'apollo'
      ? GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          autoSchemaFile: true,
          ...options.graphql,
        })
      : GraphQLModule.forRoot<MercuriusDriverConfig>({
          driver: (await import('@nestjs/mercurius')).MercuriusDriver,
          autoSchemaFile: true,
          ...options.graphql,
        });
  @Module({ imports: [RateLimitModule.forRoot(rateLimit), graphql], providers: options.providers })
  class GraphQLAppModule {}
  const platform = server === 'apollo' ? 'express' : 'fastify';
  const app = await bootstrap(platform, GraphQLAppModule as Type, options.logger ?? false);
  if (options.userFromHeader) userFromHeader(app, platform);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  const clients: Client[] = [];
  return {
    app,
    url,
    prefix,
    query: (query, headers) => postQuery(`${url}/graphql`, query, headers),
    subscriptions(connectionParams) {
      const client = createClient({
        url: `${url.replace('http', 'ws')}/graphql`,
        webSocketImpl: WebSocket,
        connectionParams,
        retryAttempts: 0,
        lazy: true,
      });
      clients.push(client);
      return client;
    },
    async close() {
      await Promise.all(clients.map((c) => c.dispose()));
      await app.close();
    },
  };
}

function userFromHeader(app: INestApplication, platform: 'express' | 'fastify'): void {
  type Req = { headers: Record<string, unknown>; user?: unknown };
  const setUser = (req: Req) => {
    const id = req.headers['x-user'];
    if (typeof id === 'string') req.user = { id };
  };
  if (platform === 'express') {
    app.use((req: Req, _res: unknown, next: () => void) => {
      setUser(req);
      next();
    });
    return;
  }
  const fastify = app.getHttpAdapter().getInstance() as {
    addHook(name: 'onRequest', hook: (req: Req, reply: unknown, done: () => void) => void): void;
  };
  fastify.addHook('onRequest', (req, _reply, done) => {
    setUser(req);
    done();
  });
}

/** POSTs `{ query }` as JSON and reads the GraphQL response. */
async function postQuery(
  url: string,
  query: string,
  headers: Record<string, string> = {},
): Promise<GraphQLReply> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ query }),
  });
  const text = await response.text();
  let body: { data?: Record<string, unknown> | null; errors?: GraphQLError[] };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    throw new Error(`not a GraphQL response (${response.status}): ${text}`);
  }
  return {
    status: response.status,
    headers: response.headers,
    data: body.data,
    errors: body.errors,
  };
}

/** What a graphql-ws subscription delivered before it ended. */
export interface SubscriptionResult {
  /** Every `next` payload. */
  next: { data?: unknown; errors?: GraphQLError[] }[];
  /** The payload of the `error` callback, if it was called. */
  error?: unknown;
}

/** Subscribes with `client` and collects until the server completes or errors. */
export function subscribe(client: Client, query: string): Promise<SubscriptionResult> {
  return new Promise((resolve) => {
    const result: SubscriptionResult = { next: [] };
    client.subscribe(
      { query },
      {
        next: (value) => void result.next.push(value as SubscriptionResult['next'][number]),
        error: (error) => resolve({ ...result, error }),
        complete: () => resolve(result),
      },
    );
  });
}
