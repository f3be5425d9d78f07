import type { UnenforcedDetail } from '../observability/events.js';
import { NEST_METADATA, RATE_LIMIT_METADATA } from '../declare/metadata.js';

/** The root operation types: Nest guards their resolvers always, other fields only on request. */
const ROOT_TYPES = new Set(['Query', 'Mutation', 'Subscription']);

/** Gateway methods Nest calls itself, without guards. */
const GATEWAY_HOOKS = new Set(['handleConnection', 'handleDisconnect', 'afterInit']);

/** `Transport` of `@nestjs/microservices`, by value. */
const TRANSPORT_NAMES = ['TCP', 'REDIS', 'NATS', 'MQTT', 'GRPC', 'RMQ', 'KAFKA'];

/** A kind of handler Nest guards. */
export type HandlerKind = 'http' | 'rpc' | 'graphql' | 'graphql-field' | 'ws';

/** The `ctx.getType()` of each kind's calls. */
const CONTEXT_TYPE: Record<HandlerKind, string> = {
  http: 'http',
  rpc: 'rpc',
  graphql: 'graphql',
  'graphql-field': 'graphql',
  ws: 'ws',
};

/* eslint-disable @typescript-eslint/no-unsafe-function-type -- classes and methods of any shape, as Nest's reflection takes them */

/** A class the app instantiates: a controller, or any other provider. */
export interface Scanned {
  readonly type: Function;
  readonly controller: boolean;
}

/** One method Nest guards. */
export interface Handler {
  readonly type: Function;
  readonly method: Function;
  /** `Class.method`, as routes and logs name it. */
  readonly route: string;
  readonly kind: HandlerKind;
}

/**
 * What kind of handler `method` of `type` is, from the metadata its decorators set; undefined
 * for a method Nest never guards. GraphQL: `@Query`, `@Mutation`, `@Subscription` (or any
 * method of a `@Resolver('Query')` class) are `graphql`; `@ResolveField` and
 * `@ResolveReference` in a typed `@Resolver` are `graphql-field`, guarded only with
 * `fieldResolverEnhancers: ['guards']`. Microservice patterns count on controllers only,
 * gateway messages on `@WebSocketGateway` classes only, as Nest serves them.
 */
export function handlerKind(
  type: Function,
  method: Function,
  controller: boolean,
): HandlerKind | undefined {
  if (controller) {
    if (Reflect.getMetadata(NEST_METADATA.route, method) !== undefined) return 'http';
    if (Reflect.getMetadata(NEST_METADATA.pattern, method) !== undefined) return 'rpc';
  }
  if (Reflect.getMetadata(NEST_METADATA.gateway, type) === true) {
    if (Reflect.getMetadata(NEST_METADATA.message, method) === true) return 'ws';
  }
  const resolverType: unknown =
    Reflect.getMetadata(NEST_METADATA.resolverType, method) ??
    Reflect.getMetadata(NEST_METADATA.resolverType, type);
  if (resolverType === undefined) return undefined;
  if (
    Reflect.getMetadata(NEST_METADATA.resolveField, method) === true ||
    Reflect.getMetadata(NEST_METADATA.resolveReference, method) === true
  )
    return 'graphql-field';
  return ROOT_TYPES.has(resolverType as string) ? 'graphql' : undefined;
}

/** What {@link scanHandlers} needs from the app. */
export interface ScanOptions {
  /** The method names of a prototype, inherited ones included (Nest's `MetadataScanner`). */
  methodNames(prototype: object): string[];
  /** Whether calls of this `ctx.getType()` are limited (an adapter serves it). */
  limited(contextType: string): boolean;
  /** Whether GraphQL field resolvers run guards; undefined when the app's options are unknown. */
  fieldGuards: boolean | undefined;
}

/**
 * Every handler Nest will guard among `classes`, and every `@RateLimit` among them that will
 * never be enforced: on a method that is no handler (a service method, a gateway's
 * `handleConnection`), on a field resolver that runs no guards, on a handler of a context
 * no adapter limits, or on a class with no handler at all.
 */
export function scanHandlers(
  classes: readonly Scanned[],
  options: ScanOptions,
): { handlers: Handler[]; unenforced: UnenforcedDetail[] } {
  const handlers: Handler[] = [];
  const unenforced: UnenforcedDetail[] = [];
  const seen = new Set<Function>();
  for (const { type, controller } of classes) {
    if (seen.has(type)) continue;
    seen.add(type);
    const prototype = type.prototype as Record<string, unknown> | undefined;
    if (typeof prototype !== 'object' || prototype === null) continue;
    const classLimited = Reflect.getMetadata(RATE_LIMIT_METADATA, type) !== undefined;
    let found = 0;
    for (const name of options.methodNames(prototype)) {
      const method = prototype[name];
      if (typeof method !== 'function') continue;
      const route = `${type.name}.${name}`;
      const limited = Reflect.getOwnMetadata(RATE_LIMIT_METADATA, method) !== undefined;
      const kind = handlerKind(type, method, controller);
      if (kind === undefined) {
        if (limited) unenforced.push({ route, reason: notAHandler(type, method, name) });
        continue;
      }
      found++;
      handlers.push({ type, method, route, kind });
      if (kind === 'graphql-field' && limited && options.fieldGuards === false) {
        unenforced.push({
          route,
          reason:
            "a field resolver, and Nest runs no guards on field resolvers unless GraphQLModule has fieldResolverEnhancers: ['guards']",
        });
      } else if ((limited || classLimited) && !options.limited(CONTEXT_TYPE[kind])) {
        unenforced.push({
          route,
          reason: `a ${CONTEXT_TYPE[kind]} handler, and no adapter of this nest-rate-limit limits ${CONTEXT_TYPE[kind]} calls: they pass untouched`,
        });
      }
    }
    if (found === 0 && Reflect.getOwnMetadata(RATE_LIMIT_METADATA, type) !== undefined) {
      unenforced.push({
        route: type.name,
        reason:
          'a class-level @RateLimit on a class with no handler Nest guards; use RateLimitService.consume() in its methods instead',
      });
    }
  }
  return { handlers, unenforced };
}

function notAHandler(type: Function, method: Function, name: string): string {
  if (Reflect.getMetadata(NEST_METADATA.gateway, type) === true && GATEWAY_HOOKS.has(name))
    return 'a gateway lifecycle hook: Nest runs no guards on connections; limit the @SubscribeMessage handlers instead';
  if (Reflect.getMetadata(NEST_METADATA.pattern, method) !== undefined)
    return 'a message pattern outside a controller: Nest serves @MessagePattern and @EventPattern only on controllers';
  return 'not a handler Nest guards (no HTTP route, resolver, gateway message or message pattern on a controller); use RateLimitService.consume() inside it instead';
}

/** A microservice server as `ModulesContainer.getRpcTargetRegistry()` gives it. */
export interface RpcServer {
  readonly transportId?: unknown;
}

/**
 * For an RPC handler whose policies identify callers by address (the default), the reason
 * its callers on `server` would all share one budget (`ip:unknown`): every transport but TCP
 * gives no caller address. Undefined when the server gives one or does not serve the handler.
 */
export function sharedBudgetReason(method: Function, server: RpcServer): string | undefined {
  const { transportId } = server;
  if (transportId === 0) return undefined;
  const bound: unknown = Reflect.getMetadata(NEST_METADATA.transport, method);
  // As Nest binds patterns: unbound ones serve every server, and a server without an id all.
  if (bound !== undefined && transportId !== undefined && bound !== transportId) return undefined;
  const name =
    typeof transportId === 'number'
      ? (TRANSPORT_NAMES[transportId] ?? String(transportId))
      : typeof transportId === 'symbol'
        ? (transportId.description ?? 'a custom transport')
        : transportId === undefined
          ? 'a custom transport'
          : String(transportId);
  return `its identity is the caller's address, which ${name} does not give: every caller would share one budget (ip:unknown); give the policy a key, e.g. { key: (ctx) => rateLimitContext(ctx).args?.tenantId }`;
}

/* eslint-enable @typescript-eslint/no-unsafe-function-type */
