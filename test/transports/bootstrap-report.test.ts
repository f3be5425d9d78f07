/**
 * No silent gaps (issue 12, item 5): at bootstrap, every handler Nest will guard is resolved
 * (a bad policy on a resolver or a gateway fails the start, as on a controller), and every
 * `@RateLimit` that will never be enforced is reported once, naming `Class.method`, as
 * `rate_limit.unenforced`: on a service method, a class without handlers, a pattern outside a
 * controller, a gateway's `handleConnection`, a field resolver that runs no guards (RPC
 * handlers whose callers would all share one budget: rpc-servers.test.ts).
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  Injectable,
  Module,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
  type ModuleMetadata,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { GqlExecutionContext } from '@nestjs/graphql';
import {
  Field,
  GRAPHQL_MODULE_OPTIONS,
  Mutation,
  ObjectType,
  Query,
  ResolveField,
  ResolveReference,
  Resolver,
  Subscription,
} from '@nestjs/graphql';
import { EventPattern, MessagePattern } from '@nestjs/microservices';
import { SubscribeMessage, WebSocketGateway, type OnGatewayConnection } from '@nestjs/websockets';
import {
  byTier,
  keys,
  RateLimit,
  RateLimitConfigError,
  RateLimitModule,
  rateLimitContext,
  type RateLimitModuleOptions,
} from '../../lib/index.js';
import { handlerKind, scanHandlers } from '../../lib/nest/module/handlers.js';
import { CapturingLogger, uniquePrefix } from '../e2e/support/app.js';
import { redisUrl } from '../harness/redis.js';

@ObjectType()
class Book {
  @Field()
  title!: string;
}

@Controller('reports')
class ReportsController {
  @Get()
  @RateLimit('5/m')
  list() {
    return [];
  }

  /** A helper the route calls: no route of its own. */
  @RateLimit('5/m')
  format() {
    return '';
  }

  @MessagePattern('reports.count')
  @RateLimit('5/m')
  count() {
    return 0;
  }
}

@Injectable()
class ExportService {
  @RateLimit('1/m')
  run() {}

  plain() {}
}

@Injectable()
@RateLimit('10/m')
class AuditService {
  write() {}
}

@Injectable()
class PatternOnProvider {
  @MessagePattern('lost')
  @RateLimit('1/m')
  handle() {}
}

@WebSocketGateway()
class ChatGateway implements OnGatewayConnection {
  @RateLimit('5/m')
  handleConnection() {}

  @SubscribeMessage('message')
  message() {}
}

@Resolver(() => Book)
class BooksResolver {
  @Query(() => [Book])
  books(): Book[] {
    return [{ title: 'Dune' }];
  }

  @ResolveField(() => String)
  @RateLimit('5/m')
  summary(): string {
    return '';
  }
}

/**
 * An app of every kind of class, with GraphQL options as given, its logs captured; the
 * modules of `importedFirst` are imported before `RateLimitModule`, the others after.
 */
async function boot(
  moduleOptions: RateLimitModuleOptions,
  metadata: ModuleMetadata,
  logger: CapturingLogger,
  importedFirst: NonNullable<ModuleMetadata['imports']> = [],
): Promise<INestApplication> {
  @Module({
    ...metadata,
    imports: [
      ...importedFirst,
      RateLimitModule.forRoot({ redis: redisUrl(), prefix: uniquePrefix(), ...moduleOptions }),
      ...(metadata.imports ?? []),
    ],
  })
  class ReportModule {}
  const app = await NestFactory.create(ReportModule, { logger, abortOnError: false });
  try {
    await app.init();
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}

/** The `rate_limit.unenforced` lines as `{ route, reason }`, sorted by route. */
function unenforced(logger: CapturingLogger): { route: string; reason: string }[] {
  return logger
    .matching('rate_limit.unenforced ')
    .map((line) => JSON.parse(line.slice(line.indexOf('{'))) as { route: string; reason: string })
    .map(({ route, reason }) => ({ route, reason }))
    .sort((a, b) => a.route.localeCompare(b.route));
}

/**
 * The options `GraphQLModule.forRoot` registers, under its own token: what the report reads.
 * The GraphQL server itself cannot start in this suite (Apollo on Express 5 needs
 * `@as-integrations/express5`; Mercurius reaches an ESM-only package through `require`,
 * which Jest on Node 20 refuses), and the report needs nothing else of it.
 */
@Module({})
class GraphQLOptions {
  static of(fieldResolverEnhancers: ('guards' | 'filters' | 'interceptors')[]) {
    return {
      module: GraphQLOptions,
      providers: [{ provide: GRAPHQL_MODULE_OPTIONS, useValue: { fieldResolverEnhancers } }],
    };
  }
}
const graphql = GraphQLOptions.of;

describe('an app with a @RateLimit Nest never enforces', () => {
  const logger = new CapturingLogger();
  let app: INestApplication;
  beforeAll(async () => {
    app = await boot(
      {},
      {
        imports: [graphql([])],
        controllers: [ReportsController],
        providers: [ExportService, AuditService, PatternOnProvider, ChatGateway, BooksResolver],
      },
      logger,
    );
  });
  afterAll(() => app?.close());

  it('is reported at bootstrap, one warning per handler, naming each', () => {
    expect(unenforced(logger)).toEqual([
      {
        route: 'AuditService',
        reason: expect.stringContaining('a class-level @RateLimit on a class with no handler'),
      },
      {
        route: 'BooksResolver.summary',
        reason: expect.stringContaining("fieldResolverEnhancers: ['guards']"),
      },
      { route: 'ChatGateway.handleConnection', reason: expect.stringContaining('lifecycle hook') },
      { route: 'ExportService.run', reason: expect.stringContaining('not a handler Nest guards') },
      {
        route: 'PatternOnProvider.handle',
        reason: expect.stringContaining('only on controllers'),
      },
      {
        route: 'ReportsController.format',
        reason: expect.stringContaining('not a handler Nest guards'),
      },
    ]);
    expect(
      logger.lines.filter((l) => l.message.startsWith('rate_limit.unenforced')).map((l) => l.level),
    ).toEqual(new Array(6).fill('warn'));
  });

  it('says nothing of the handlers it limits, nor of undecorated methods', () => {
    const routes = unenforced(logger).map((u) => u.route);
    for (const route of [
      'ReportsController.list',
      'ReportsController.count',
      'ExportService.plain',
      'ChatGateway.message',
      'BooksResolver.books',
    ])
      expect(routes).not.toContain(route);
  });
});

it('a field resolver is not reported when GraphQL runs guards on fields', async () => {
  const logger = new CapturingLogger();
  const app = await boot(
    {},
    { imports: [graphql(['guards'])], providers: [BooksResolver] },
    logger,
  );
  try {
    expect(logger.matching('fieldResolverEnhancers')).toEqual([]);
  } finally {
    await app.close();
  }
});

describe('a bad policy on a handler of any kind fails the start, naming it', () => {
  @Resolver()
  class BurstyResolver {
    @Query(() => String)
    @RateLimit('10/m', { burst: 20 })
    bursty() {
      return '';
    }
  }

  @WebSocketGateway()
  class BurstyGateway {
    @SubscribeMessage('bursty')
    @RateLimit('10/m', { burst: 20 })
    bursty() {}
  }

  it.each([
    ['a resolver', BurstyResolver, 'BurstyResolver.bursty'],
    ['a gateway', BurstyGateway, 'BurstyGateway.bursty'],
  ])('%s', async (_kind, provider, route) => {
    const failed = boot(
      { algorithm: 'fixed-window' },
      { providers: [provider] },
      new CapturingLogger(),
    );
    await expect(failed).rejects.toBeInstanceOf(RateLimitConfigError);
    await expect(failed).rejects.toThrow(new RegExp(`burst 20.*\\(in ${route}\\)`));
  });
});

describe('handlerKind reads the metadata each Nest package sets', () => {
  @Resolver(() => Book)
  class Kinds {
    @Query(() => String) query() {}
    @Mutation(() => String) mutation() {}
    @Subscription(() => String) subscription() {}
    @ResolveField(() => String) field() {}
    @ResolveReference() reference() {}
    helper() {}
  }

  @WebSocketGateway()
  class Gateway {
    @SubscribeMessage('m') message() {}
    handleConnection() {}
  }

  @Controller()
  class Patterns {
    @Get() route() {}
    @MessagePattern('m') message() {}
    @EventPattern('e') event(_data: unknown) {}
  }

  const classes = { Kinds, Gateway, Patterns };
  it.each([
    ['Kinds', 'query', false, 'graphql'],
    ['Kinds', 'mutation', false, 'graphql'],
    ['Kinds', 'subscription', false, 'graphql'],
    ['Kinds', 'field', false, 'graphql-field'],
    ['Kinds', 'reference', false, 'graphql-field'],
    ['Kinds', 'helper', false, undefined],
    ['Gateway', 'message', false, 'ws'],
    ['Gateway', 'handleConnection', false, undefined],
    ['Patterns', 'route', true, 'http'],
    ['Patterns', 'message', true, 'rpc'],
    ['Patterns', 'event', true, 'rpc'],
    // Nest serves routes and patterns on controllers only.
    ['Patterns', 'message', false, undefined],
  ] as const)('%s.%s (on a controller: %s) is %s', (className, name, controller, kind) => {
    const type = classes[className];
    const method = (type.prototype as unknown as Record<string, () => void>)[name]!;
    expect(handlerKind(type, method, controller)).toBe(kind);
  });

  it('a decorated handler of a context no adapter limits is reported', () => {
    class Decorated {
      @Query(() => String)
      @RateLimit('1/m')
      query() {}
    }
    Resolver()(Decorated);
    const scan = scanHandlers([{ type: Decorated, controller: false }], {
      methodNames: (p) => Object.getOwnPropertyNames(p).filter((n) => n !== 'constructor'),
      limited: (type) => type !== 'graphql',
      fieldGuards: undefined,
    });
    expect(scan.handlers.map((h) => [h.route, h.kind])).toEqual([['Decorated.query', 'graphql']]);
    expect(scan.unenforced).toEqual([
      {
        route: 'Decorated.query',
        reason:
          'a graphql handler, and no adapter of this nest-rate-limit limits graphql calls: they pass untouched',
      },
    ]);
  });
});

/*
 * Per-user policies on resolvers and gateways are decided by the module's global guard, before
 * the guards that set the user (only HTTP routes wait for them): the README's tier recipe on a
 * resolver with its own API-key guard, or any per-user policy behind a global APP_GUARD
 * registered after the module's, silently keys by address and gives a pro customer the free
 * tier. Reported at bootstrap, naming the handler and the fix; nothing when the setup is right.
 */
describe('per-user policies decided before the guards that set the user', () => {
  /** The README's API-key guard: sets `user = { id, plan }`, on any transport. */
  @Injectable()
  class ApiKeyGuard implements CanActivate {
    canActivate(ctx: ExecutionContext): boolean {
      const req = (
        ctx.getType<string>() === 'graphql'
          ? GqlExecutionContext.create(ctx).getContext<{ req: object }>().req
          : ctx.switchToHttp().getRequest<object>()
      ) as { user?: unknown };
      req.user = { id: 'acct-1', plan: 'pro' };
      return true;
    }
  }

  const plan = (ctx: ExecutionContext) =>
    (rateLimitContext(ctx).user as { plan?: string } | undefined)?.plan;
  const tiers = { free: '10/m', pro: '100/m' } as const;

  @Resolver()
  class TierResolver {
    @Query(() => String)
    @UseGuards(ApiKeyGuard)
    @RateLimit(byTier(tiers, plan, { fallback: 'free' }), {
      name: 'tier',
      key: keys.header('x-api-key'),
    })
    report() {
      return '';
    }
  }

  @Resolver()
  class MarkedTierResolver {
    @Query(() => String)
    @UseGuards(ApiKeyGuard)
    @RateLimit(
      byTier(
        tiers,
        keys.withoutUser((ctx: ExecutionContext) =>
          String(rateLimitContext(ctx).request?.headers?.['x-plan'] ?? ''),
        ),
        { fallback: 'free' },
      ),
      { name: 'tier', key: keys.header('x-api-key') },
    )
    report() {
      return '';
    }
  }

  /** A per-user policy (the default key) on a resolver and a gateway, no guard of their own. */
  @Resolver()
  class AccountResolver {
    @Query(() => String)
    @RateLimit('10/m', { name: 'per-user' })
    account() {
      return '';
    }
  }

  @WebSocketGateway()
  class AccountGateway {
    @SubscribeMessage('account')
    @RateLimit('10/m', { name: 'per-user' })
    account() {}
  }

  /** The Nest docs' global authentication guard, in a module of its own. */
  @Module({ providers: [{ provide: APP_GUARD, useClass: ApiKeyGuard }] })
  class AuthModule {}

  async function reported(
    providers: ModuleMetadata['providers'],
    options: {
      after?: boolean;
      before?: boolean;
      graphql?: RateLimitModuleOptions['graphql'];
    } = {},
  ) {
    const logger = new CapturingLogger();
    const app = await boot(
      options.graphql ? { graphql: options.graphql } : {},
      { imports: [graphql([]), ...(options.after ? [AuthModule] : [])], providers },
      logger,
      options.before ? [AuthModule] : [],
    );
    await app.close();
    return unenforced(logger);
  }

  it('byTier recipe on a resolver with its own guard: warned, naming the handler and the fix', async () => {
    expect(await reported([TierResolver, ApiKeyGuard])).toEqual([
      {
        route: 'TierResolver.report',
        reason:
          'its policy "tier" reads the user, decided by the global rate-limit guard before ' +
          "this handler's own guards: a user those guards set is not known yet, so the client " +
          'address is used instead and a plan function sees no user. Authenticate in ' +
          'middleware or in the GraphQL context function (set req.user before resolvers run), ' +
          'or mark each function that reads no user with keys.withoutUser',
      },
    ]);
  });

  it('the same recipe with its plan function marked keys.withoutUser: not warned', async () => {
    expect(await reported([MarkedTierResolver, ApiKeyGuard])).toEqual([]);
  });

  it('a global APP_GUARD imported after RateLimitModule: each per-user resolver and gateway policy warned', async () => {
    const lines = await reported([AccountResolver, AccountGateway], { after: true });
    expect(lines.map((l) => l.route)).toEqual([
      'AccountGateway.account',
      'AccountResolver.account',
    ]);
    const [gateway, resolver] = lines.map((l) => l.reason);
    expect(resolver).toBe(
      'its policy "per-user" reads the user, decided by the global rate-limit guard before ' +
        "the app's global guards registered after it (an APP_GUARD of a module imported after " +
        'RateLimitModule, or app.useGlobalGuards): a user those guards set is not known yet, ' +
        'so the client address is used instead and a plan function sees no user. Authenticate ' +
        'in middleware or in the GraphQL context function (set req.user before resolvers ' +
        "run), or import that guard's module before RateLimitModule, or mark each function " +
        'that reads no user with keys.withoutUser',
    );
    expect(gateway).toContain('Authenticate in handleConnection, on the socket');
    expect(gateway).toContain("import that guard's module before RateLimitModule");
  });

  it('the same guard imported before RateLimitModule: not warned', async () => {
    expect(await reported([AccountResolver, AccountGateway], { before: true })).toEqual([]);
  });

  it('a GraphQL budget behind a global guard, imported after or before: warned (charged before every guard)', async () => {
    const budget = { budget: '100/m' } as const;
    const reason =
      'the GraphQL budget\'s policy "cost" reads the user, charged before any resolver runs, ' +
      "while the app's global guards (an APP_GUARD, or app.useGlobalGuards) run only when a " +
      'resolver does: the user they set is not known yet, so the budget keys by the client ' +
      'address. Authenticate in middleware or in the GraphQL context function (set req.user ' +
      'before resolvers run), or mark each function that reads no user with keys.withoutUser';
    const after = await reported([AccountResolver], { after: true, graphql: budget });
    expect(after).toEqual([
      { route: 'AccountResolver.account', reason: expect.stringContaining('registered after') },
      { route: 'GraphQL operation', reason },
    ]);
    // The resolver's policy sees the user then; the budget, charged before execution, does not.
    const before = await reported([AccountResolver], { before: true, graphql: budget });
    expect(before).toEqual([{ route: 'GraphQL operation', reason }]);
    // No global guard of the app's, no guard on the resolver: nothing to report.
    expect(await reported([AccountResolver], { graphql: budget })).toEqual([]);
    // A budget keyed by something other than the user: nothing either.
    const byAddress = { budget: { rate: '100/m', key: keys.ip } };
    expect(await reported([AccountResolver], { before: true, graphql: byAddress })).toEqual([]);
  });
});
