/**
 * Every metadata key this package reads or writes, in one place. The Nest packages' keys are
 * spelled out as strings: reading them imports none of those packages (each is an optional
 * peer), and each is named after its constant in Nest's source.
 */

/** Metadata key of `@RateLimit` and `@ConcurrencyLimit`: the policies declared on a holder. */
export const RATE_LIMIT_METADATA = 'nest-rate-limit:policies';
/** Metadata key of `@SkipRateLimit`: `true`, or the names of the skipped policies. */
export const SKIP_RATE_LIMIT_METADATA = 'nest-rate-limit:skip';
/** Metadata key of `@ConcurrencyLimit(n, { includeUpload: true })`: the names of those policies. */
export const INCLUDE_UPLOAD_METADATA = 'nest-rate-limit:include-upload';

/** The keys of Nest's own decorators. */
export const NEST_METADATA = {
  /** `GUARDS_METADATA` of `@nestjs/common`: `@UseGuards`. */
  guards: '__guards__',
  /** `INTERCEPTORS_METADATA` of `@nestjs/common`: `@UseInterceptors`. */
  interceptors: '__interceptors__',
  /** `METHOD_METADATA` of `@nestjs/common`: `@Get`, `@Post`, … on a controller method. */
  route: 'method',
  /** `ROUTE_ARGS_METADATA` of `@nestjs/common`: `@Res()`, `@Body()`, … on a method's parameters. */
  routeArgs: '__routeArguments__',
  /** `@Res({ passthrough })`, on the class under the method's name. */
  responsePassthrough: '__responsePassthrough__',
  /** `PATTERN_METADATA` of `@nestjs/microservices`: `@MessagePattern`, `@EventPattern`. */
  pattern: 'microservices:pattern',
  /** `PATTERN_HANDLER_METADATA` of `@nestjs/microservices`: message (1) or event (2) handler. */
  patternHandler: 'microservices:handler_type',
  /** `TRANSPORT_METADATA` of `@nestjs/microservices`: the one transport a pattern is bound to. */
  transport: 'microservices:transport',
  /** `GATEWAY_METADATA` of `@nestjs/websockets`: `@WebSocketGateway` on the class. */
  gateway: 'websockets:is_gateway',
  /** `MESSAGE_MAPPING_METADATA` of `@nestjs/websockets`: `@SubscribeMessage`. */
  message: 'websockets:message_mapping',
  /** `RESOLVER_TYPE_METADATA` of `@nestjs/graphql`: `@Resolver(type)`, `@Query`, `@Mutation`, `@Subscription`. */
  resolverType: 'graphql:resolver_type',
  /** `RESOLVER_PROPERTY_METADATA` of `@nestjs/graphql`: `@ResolveField`. */
  resolveField: 'graphql:resolve_property',
  /** `RESOLVER_REFERENCE_METADATA` of `@nestjs/graphql`: `@ResolveReference` (federation). */
  resolveReference: 'graphql:resolve_reference',
} as const;
