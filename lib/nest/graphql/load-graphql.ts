import { RateLimitConfigError } from '../../core/errors.js';
import type * as GraphQL from 'graphql';
import type { GraphQLRuntime } from '../../graphql/runtime.js';

/**
 * What the operation cost needs of the app's `graphql`: the analysis's part, its error class,
 * and what a graphql-ws server runs (`parse`, `validate`, `execute`, `subscribe`).
 */
export type AppGraphQL = GraphQLRuntime &
  Pick<typeof GraphQL, 'GraphQLError' | 'parse' | 'validate' | 'execute' | 'subscribe'>;

/**
 * The app's own `graphql` (an optional peer, installed with `@nestjs/graphql`), loaded at
 * bootstrap when the module has a `graphql` option: its classes are the ones the app's
 * schema was built with, so the cost analysis's type checks hold.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_PEER_DEPENDENCY` when `graphql` is not installed
 */
export async function loadGraphQL(): Promise<AppGraphQL> {
  try {
    // webpackIgnore: bundlers must not pull in an optional peer at build time.
    const graphql = (await import(/* webpackIgnore: true */ 'graphql')) as unknown as AppGraphQL & {
      default?: AppGraphQL;
    };
    return typeof graphql.getNamedType === 'function' ? graphql : graphql.default!;
  } catch (error) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_PEER_DEPENDENCY',
      `the graphql option needs the graphql package, installed with @nestjs/graphql: ${(error as Error).message}`,
      'RateLimitModule options graphql',
    );
  }
}
