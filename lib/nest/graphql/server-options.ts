import { Inject, Injectable, Optional, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { pricedGraphQLWs } from './graphql-ws-pricing.js';
import type { OperationCosts } from './operation-costs.js';
import { DEFAULT_MAX_TOKENS } from './options.js';
import { OPERATION_COSTS } from './tokens.js';

type Obj = Record<string, unknown>;

/** The part of `@nestjs/graphql`'s driver (`AbstractGraphQLDriver`) this provider wraps. */
interface Driver {
  start(options: Obj): Promise<unknown>;
}

function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null;
}

/**
 * The GraphQL server options the operation cost needs, added to what `GraphQLModule` starts
 * its driver with: the `maxTokens` parser limit (Apollo Server's `parseOptions`, Mercurius's
 * `graphql.parseOptions`; the app's own `maxTokens` there wins) and, under Apollo, a
 * graphql-ws server that prices every operation whole (see `graphql-ws-pricing.ts`).
 *
 * The driver's `start` is wrapped here, in `onModuleInit`: `RateLimitModule` is global, so
 * Nest runs this before `GraphQLModule`'s own `onModuleInit` starts the driver. Without
 * `@nestjs/graphql`, or without a `graphql` option, it does nothing.
 */
@Injectable()
export class GraphQLServerOptions implements OnModuleInit {
  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Optional() @Inject(OPERATION_COSTS) private readonly costs?: OperationCosts | null,
  ) {}

  onModuleInit(): void {
    const costs = this.costs;
    if (!costs) return;
    for (const wrapper of this.discovery.getProviders()) {
      const token: unknown = wrapper.token;
      // Matched by name: `@nestjs/graphql` is an optional peer, never imported here.
      if (typeof token !== 'function' || token.name !== 'AbstractGraphQLDriver') continue;
      const driver: unknown = wrapper.instance;
      if (!isObject(driver) || typeof driver.start !== 'function') continue;
      const start = (driver as unknown as Driver).start.bind(driver);
      const mercurius = /mercurius/i.test(driver.constructor.name);
      (driver as unknown as Driver).start = (options: Obj) =>
        start(serverOptions(costs, options, mercurius));
    }
  }
}

/** `options` with the parser's token limit and, under Apollo, graphql-ws priced. */
function serverOptions(costs: OperationCosts, options: Obj, mercurius: boolean): Obj {
  const maxTokens = costs.options.maxTokens ?? DEFAULT_MAX_TOKENS;
  const limited = (parseOptions: unknown): Obj => ({
    ...(Number.isFinite(maxTokens) && { maxTokens }),
    ...(isObject(parseOptions) ? parseOptions : {}),
  });
  if (mercurius) {
    const graphql = isObject(options.graphql) ? options.graphql : {};
    return { ...options, graphql: { ...graphql, parseOptions: limited(graphql.parseOptions) } };
  }
  const out: Obj = { ...options, parseOptions: limited(options.parseOptions) };
  // As `@nestjs/apollo`'s driver reads them: `installSubscriptionHandlers` alone means graphql-ws.
  if (options.installSubscriptionHandlers || options.subscriptions) {
    const subscriptions = isObject(options.subscriptions)
      ? options.subscriptions
      : { 'graphql-ws': {} };
    const ws = subscriptions['graphql-ws'];
    if (ws !== undefined && ws !== false) {
      out.subscriptions = {
        ...subscriptions,
        'graphql-ws': pricedGraphQLWs(costs, subscriptions, isObject(ws) ? ws : {}, maxTokens),
      };
    }
  }
  return out;
}
