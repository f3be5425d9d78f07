import type { ExecutionContext } from '@nestjs/common';

/**
 * The class and handler an operation's context names, for logs and user functions that read
 * `ctx.getClass()` / `ctx.getHandler()`: an operation belongs to no resolver.
 */
class GraphQLOperation {
  /** Stands for the operation as a whole. */
  operation(): void {}
}

// A registered symbol: the requested cost travels with the context to the budget's cost
// function, whichever copy of the package (CommonJS, ESM) built the context.
const REQUESTED = Symbol.for('nest-rate-limit:requested-cost');

type OperationContext = ExecutionContext & { readonly [REQUESTED]: number };

/**
 * An `ExecutionContext` of type `'graphql'` for a whole operation, before any resolver runs,
 * shaped as a root field's (`[root, args, context, info]`): the GraphQL transport reads the
 * request and the user from `contextValue` as for a resolver, so key functions,
 * `rateLimitContext(ctx)` and `skip` work unchanged. `args` are the operation's variables.
 */
export function operationContext(
  contextValue: unknown,
  variables: unknown,
  requested: number,
): ExecutionContext {
  const args = [undefined, variables ?? {}, contextValue, undefined];
  const handler = GraphQLOperation.prototype.operation;
  const unsupported = (): never => {
    throw new Error('a GraphQL operation has no HTTP, RPC or WebSocket context');
  };
  const ctx: OperationContext = {
    [REQUESTED]: requested,
    getClass: <T>() => GraphQLOperation as T,
    getHandler: () => handler,
    getArgs: <T extends unknown[]>() => args as T,
    getArgByIndex: <T>(index: number) => args[index] as T,
    getType: <T extends string>() => 'graphql' as T,
    switchToHttp: unsupported,
    switchToRpc: unsupported,
    switchToWs: unsupported,
  };
  return ctx;
}

/** The requested cost an operation's context carries (0 for any other context). */
export function requestedCostOf(ctx: ExecutionContext): number {
  return (ctx as Partial<OperationContext>)[REQUESTED] ?? 0;
}
