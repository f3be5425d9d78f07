/**
 * The app of the GraphQL operation limits tests (issue 32), code-first, on Apollo (Express) or
 * Mercurius (Fastify), with graphql-ws (Apollo) or Mercurius's WebSocket (`fullWsTransport`, so
 * that queries and mutations run over it too): a recursive `Node` (`node { next { next … } }`)
 * for depth, a page object `conn(first) { total items { id } }`, a list `nodes(first)`, a
 * `hello`, a `sendEmail` mutation and a `ticks` subscription. Counts resolver calls.
 */
import 'reflect-metadata';
import { Module, type INestApplication, type Type } from '@nestjs/common';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import {
  Args,
  Field,
  GraphQLModule,
  Int,
  Mutation,
  ObjectType,
  Query,
  ResolveField,
  Resolver,
  Subscription,
} from '@nestjs/graphql';
import type { MercuriusDriverConfig } from '@nestjs/mercurius';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { RateLimitModule, type RateLimitModuleOptions } from '../../../lib/index.js';
import { bootstrap } from '../../e2e/support/app.js';

export type LimitsServer = 'apollo' | 'mercurius';

/** Every resolver counter at 0: what `runs` holds when nothing ran. */
export const NO_RUNS = Object.freeze({
  node: 0,
  next: 0,
  conn: 0,
  nodes: 0,
  hello: 0,
  sendEmail: 0,
  ticks: 0,
  feed: 0,
});

/** Resolver calls since the app started. */
export const runs = { ...NO_RUNS };

export function resetRuns(): void {
  Object.assign(runs, NO_RUNS);
}

@ObjectType()
class Node {
  @Field(() => Int)
  id!: number;
  @Field(() => String, { nullable: true })
  name?: string;
  @Field(() => Node, { nullable: true })
  next?: Node;
}

@ObjectType()
class Conn {
  @Field(() => Int)
  total!: number;
  @Field(() => [Node])
  items!: Node[];
}

@Resolver(() => Node)
class LimitsResolver {
  @Query(() => Node)
  node() {
    runs.node++;
    return { id: 0 };
  }
  @ResolveField(() => Node, { nullable: true })
  next() {
    runs.next++;
    return { id: 1 };
  }
  @Query(() => Conn)
  conn(@Args('first', { type: () => Int, nullable: true }) first?: number) {
    runs.conn++;
    return {
      total: 2,
      items: Array.from({ length: Math.min(first ?? 2, 2) }, (_, id) => ({ id })),
    };
  }
  @Query(() => [Node])
  nodes(@Args('first', { type: () => Int, nullable: true }) first?: number) {
    runs.nodes++;
    return Array.from({ length: Math.min(first ?? 2, 2) }, (_, id) => ({ id }));
  }
  @Query(() => String)
  hello() {
    runs.hello++;
    return 'world';
  }
  /** `hello`, nullable: a refusal of it alone leaves its siblings' data in the response. */
  @Query(() => String, { nullable: true })
  hi() {
    runs.hello++;
    return 'hi';
  }
  @Query(() => String)
  version() {
    return '1';
  }
  @Mutation(() => Boolean)
  sendEmail() {
    runs.sendEmail++;
    return true;
  }
  @Subscription(() => Node)
  ticks() {
    runs.ticks++;
    return (async function* () {
      yield { ticks: { id: 1 } };
    })();
  }
  /** A page per event: `first` (a slicing argument) sizes its `items`. */
  @Subscription(() => Conn)
  feed(@Args('first', { type: () => Int, nullable: true }) first?: number) {
    runs.feed++;
    const items = Array.from({ length: Math.min(first ?? 2, 2) }, (_, id) => ({ id }));
    return (async function* () {
      yield { feed: { total: 2, items } };
    })();
  }
}

export interface LimitsApp {
  app: INestApplication;
  url: string;
  close(): Promise<void>;
}

/** Boots the app on 127.0.0.1:0. */
export async function startLimitsApp(
  server: LimitsServer,
  rateLimit: RateLimitModuleOptions,
  /** GraphQLModule options merged over the defaults. */
  more: Record<string, unknown> = {},
): Promise<LimitsApp> {
  const graphql =
    server === 'apollo'
      ? GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          autoSchemaFile: true,
          subscriptions: { 'graphql-ws': true },
          ...more,
        })
      : GraphQLModule.forRoot<MercuriusDriverConfig>({
          driver: (await import('@nestjs/mercurius')).MercuriusDriver,
          autoSchemaFile: true,
          subscription: { fullWsTransport: true },
          ...more,
        });
  @Module({ imports: [RateLimitModule.forRoot(rateLimit), graphql], providers: [LimitsResolver] })
  class LimitsAppModule {}
  const app = await bootstrap(
    server === 'apollo' ? 'express' : 'fastify',
    LimitsAppModule as Type,
    false,
  );
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  return { app, url, close: () => app.close() };
}

export interface GraphQLError {
  message: string;
  extensions?: Record<string, unknown>;
}

/** A GraphQL response as the tests read it, with its size in bytes. */
export interface Reply {
  status: number;
  bytes: number;
  body: {
    data?: Record<string, unknown> | null;
    errors?: GraphQLError[];
    extensions?: { cost?: Record<string, unknown> };
  };
}

/** POSTs `{ query, operationName }` to `/graphql`. */
export async function operation(
  url: string,
  query: string,
  operationName?: string,
): Promise<Reply> {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, operationName }),
  });
  const text = await response.text();
  return { status: response.status, bytes: text.length, body: JSON.parse(text) as Reply['body'] };
}

/** What a graphql-ws client received for one operation, and the bytes of its results. */
export interface WsReply {
  next: { data?: unknown; errors?: GraphQLError[]; extensions?: Record<string, unknown> }[];
  error?: GraphQLError[];
  bytes: number;
}

/** Runs one operation over graphql-ws to its end (`complete` or `error`). */
export async function overWebSocket(
  url: string,
  query: string,
  variables?: Record<string, unknown>,
): Promise<WsReply> {
  const client = createClient({
    url: `${url.replace('http', 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
  });
  const reply: WsReply = { next: [], bytes: 0 };
  try {
    await new Promise<void>((resolve, reject) => {
      client.subscribe(
        { query, variables },
        {
          next: (value) => {
            reply.bytes += JSON.stringify(value).length;
            reply.next.push(value as WsReply['next'][number]);
          },
          error: (error) => {
            if (!Array.isArray(error)) return reject(error as Error);
            reply.error = error as GraphQLError[];
            resolve();
          },
          complete: resolve,
        },
      );
    });
    return reply;
  } finally {
    await client.dispose();
  }
}

/** The first error a graphql-ws client received, wherever the server put it. */
export function wsError(reply: WsReply): GraphQLError | undefined {
  return reply.error?.[0] ?? reply.next[0]?.errors?.[0];
}
