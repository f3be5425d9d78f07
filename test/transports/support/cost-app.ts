/**
 * The app of the GraphQL operation cost tests (issue 25), code-first or schema-first, on
 * Apollo (Express) or Mercurius (Fastify): `posts(first)` returns at most 3 posts whatever
 * `first` asks, each with an `author` whose weight is 2 (`@Cost(2)`, or `@cost(weight: 2)`),
 * so a query's actual cost is below its requested cost. Counts resolver calls. No Jest
 * import: test/transports/support/cost-worker.ts runs it in a process of its own.
 */
import 'reflect-metadata';
import { Module, type INestApplication, type Type } from '@nestjs/common';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import {
  Args,
  Field,
  GraphQLModule,
  Int,
  ObjectType,
  Parent,
  Query,
  ResolveField,
  Resolver,
} from '@nestjs/graphql';
import type { MercuriusDriverConfig } from '@nestjs/mercurius';
import { RateLimitModule, type RateLimitModuleOptions } from '../../../lib/index.js';
import { Cost } from '../../../lib/graphql/decorators.js';
import { bootstrap } from '../../e2e/support/app.js';

export type CostServer = 'apollo' | 'mercurius';
export type SchemaStyle = 'code-first' | 'schema-first';

/** Resolver calls since the app started. */
export const runs = { posts: 0, author: 0, me: 0 };

/** Posts returned whatever `first` asks. */
const RETURNED = 3;

@ObjectType()
class Author {
  @Field(() => Int)
  id!: number;
}

@ObjectType()
class Post {
  @Field(() => Int)
  id!: number;
  @Field(() => Author)
  @Cost(2)
  author!: Author;
}

function posts(first: number | undefined): { id: number }[] {
  runs.posts++;
  return Array.from({ length: Math.min(Math.max(first ?? 10, 0), RETURNED) }, (_, i) => ({
    id: i,
  }));
}

@Resolver(() => Post)
class CodeFirstResolver {
  @Query(() => [Post])
  posts(@Args('first', { type: () => Int, nullable: true }) first?: number) {
    return posts(first);
  }
  @ResolveField(() => Author)
  author(@Parent() post: { id: number }) {
    runs.author++;
    return { id: post.id };
  }
  @Query(() => String)
  me() {
    runs.me++;
    return 'me';
  }
}

/** The same schema in SDL, the weight as the IBM directive. */
const SDL = `
directive @cost(weight: Int!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR
directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
type Author { id: Int! }
type Post { id: Int! author: Author! @cost(weight: 2) }
type Query { posts(first: Int): [Post!]! me: String! }
`;

@Resolver('Query')
class SchemaFirstQuery {
  @Query('posts')
  posts(@Args('first', { type: () => Int, nullable: true }) first?: number) {
    return posts(first);
  }
  @Query('me')
  me() {
    runs.me++;
    return 'me';
  }
}

@Resolver('Post')
class SchemaFirstPost {
  @ResolveField('author')
  author(@Parent() post: { id: number }) {
    runs.author++;
    return { id: post.id };
  }
}

// tsx, the worker's loader, emits no decorator metadata, and @nestjs/graphql reads the
// parameter types of every @Args method even when the argument's type is given.
for (const type of [CodeFirstResolver, SchemaFirstQuery]) {
  if (!Reflect.hasMetadata('design:paramtypes', type.prototype, 'posts'))
    Reflect.defineMetadata('design:paramtypes', [Number], type.prototype, 'posts');
}

export interface CostApp {
  app: INestApplication;
  url: string;
  close(): Promise<void>;
}

/** Boots the app on 127.0.0.1:0, batching allowed. */
export async function startCostApp(
  server: CostServer,
  style: SchemaStyle,
  rateLimit: RateLimitModuleOptions,
  /** GraphQLModule options merged over the defaults (subscriptions, say). */
  more: Record<string, unknown> = {},
): Promise<CostApp> {
  const schema = style === 'code-first' ? { autoSchemaFile: true as const } : { typeDefs: SDL };
  const graphql =
    server === 'apollo'
      ? GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          allowBatchedHttpRequests: true,
          ...schema,
          ...more,
        })
      : GraphQLModule.forRoot<MercuriusDriverConfig>({
          driver: (await import('@nestjs/mercurius')).MercuriusDriver,
          allowBatchedQueries: true,
          ...schema,
          ...more,
        });
  const providers =
    style === 'code-first' ? [CodeFirstResolver] : [SchemaFirstQuery, SchemaFirstPost];
  @Module({ imports: [RateLimitModule.forRoot(rateLimit), graphql], providers })
  class CostAppModule {}
  const app = await bootstrap(
    server === 'apollo' ? 'express' : 'fastify',
    CostAppModule as Type,
    false,
  );
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  return { app, url, close: () => app.close() };
}

/** A GraphQL response as the tests read it. */
export interface CostReply {
  status: number;
  headers: Headers;
  body: {
    data?: Record<string, unknown> | null;
    errors?: { message: string; extensions?: Record<string, unknown> }[];
    extensions?: { cost?: Record<string, unknown> };
  };
}

/** POSTs one operation, or a batch (an array), to `/graphql`. */
export async function post(
  url: string,
  body: object | object[],
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: unknown }> {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, json: await response.json() };
}

/** POSTs `{ query, variables }` and reads the one response. */
export async function operation(
  url: string,
  query: string,
  variables?: Record<string, unknown>,
  headers?: Record<string, string>,
): Promise<CostReply> {
  const { status, headers: h, json } = await post(url, { query, variables }, headers);
  return { status, headers: h, body: json as CostReply['body'] };
}
