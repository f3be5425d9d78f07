import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { HttpAdapterHost, Reflector } from '@nestjs/core';
import { InjectThrottlerOptions, InjectThrottlerStorage } from './decorators.js';
import { EngineStorage, type ThrottlerHit } from './engine-storage.js';
import { ThrottlerFailures } from './failures.js';
import { throttlerMessage, ThrottlerException } from './exception.js';
import { sha256 } from './hash.js';
import { DEFAULT_IPV6_SUBNET_PREFIX, trackerOf } from './ip.js';
import { platformAddress, type AddressOf } from './platform-address.js';
import type {
  ThrottlerLimitDetail,
  ThrottlerModuleOptions,
  ThrottlerOptions,
  ThrottlerRecord,
  ThrottlerRequest,
} from './options.js';
import { requestResponseOf, userAgentIgnored } from './request-response.js';
import { blockUnset, handling } from './block-default.js';
import { checkThrottlers, throttlerRequest } from './requests.js';
import type { ThrottlerStorage, ThrottlerStorageRecord } from './storage.js';

/** A throttler's hit on the atomic path, with the patterns' `lastIndex` after its test. */
interface Counted {
  request: ThrottlerRequest;
  tracker: string;
  hit: ThrottlerHit;
  lastIndexes: number[] | undefined;
}

/**
 * The throttler's guard, on this package's engine. Register it as the throttler's is
 * (`{ provide: APP_GUARD, useClass: ThrottlerGuard }`, or `@UseGuards`), and subclass it at
 * the same protected methods: `getTracker`, `generateKey`, `shouldSkip`,
 * `throwThrottlingException`, `getRequestResponse`, `getErrorMessage`, `handleRequest`.
 *
 * With this package's storages, every throttler of a request is decided in one store call
 * ({@link ThrottlerGuard.handleRequests}); a subclass that overrides `handleRequest`, a
 * subclass of our storages that overrides `increment`, or a storage of your own, is asked
 * throttler by throttler, as the throttler does. Either way, when one of our storages fails
 * or times out, the request is admitted and logged (`rate_limit.backend_error`, fail-open).
 * A user function that throws on a request (a `limit`, `ttl` or `blockDuration` function,
 * `skipIf`, `getTracker`, `generateKey`), or a setting that resolves to no number, refuses
 * the request with that error, as the throttler does (Nest answers an `HttpException` as
 * such, any other error 500): no client input switches a limit off.
 */
@Injectable()
export class ThrottlerGuard implements CanActivate {
  protected headerPrefix = 'X-RateLimit';
  protected logger = new Logger(ThrottlerGuard.name);
  protected errorMessage = throttlerMessage;
  protected throttlers!: Array<ThrottlerOptions>;
  protected commonOptions!: Pick<
    ThrottlerOptions,
    'skipIf' | 'ignoreUserAgents' | 'getTracker' | 'generateKey' | 'setHeaders'
  >;
  protected ipv6SubnetPrefix = DEFAULT_IPV6_SUBNET_PREFIX;
  private readonly failures = new ThrottlerFailures(() => this.logger);
  private readonly admits = (error: unknown) => this.failures.admits(error);
  /** The `ignoreUserAgents` patterns with a `lastIndex` that `test` moves (`/g`, `/y`). */
  private statefulPatterns: RegExp[] = [];
  /**
   * The app's platform, for the client address of a WebSocket upgrade request. A property,
   * not a constructor parameter: subclasses call `super` with the throttler's three; absent
   * where the guard is built by hand.
   */
  @Optional()
  @Inject(HttpAdapterHost)
  private readonly platformHost?: HttpAdapterHost;
  /** The platform's address getter, once found (`null`: no platform that has one). */
  private addressOf: AddressOf | null | undefined;

  constructor(
    @InjectThrottlerOptions() protected readonly options: ThrottlerModuleOptions,
    @InjectThrottlerStorage() protected readonly storageService: ThrottlerStorage,
    // Named, not left to emitted parameter types: compilers without decorator metadata
    // (esbuild, tsx, SWC without it) build the guard too.
    @Inject(Reflector) protected readonly reflector: Reflector,
  ) {}

  async onModuleInit(): Promise<void> {
    const list = Array.isArray(this.options) ? this.options : this.options.throttlers;
    // A setting that is no number fails here, naming it, not on every request.
    checkThrottlers(list);
    // Shortest window first, as the throttler orders them (functions last).
    this.throttlers = [...list]
      .sort((first, second) => {
        if (typeof first.ttl === 'function') return 1;
        if (typeof second.ttl === 'function') return 0;
        return first.ttl - second.ttl;
      })
      .map((opt) => ({ ...opt, name: opt.name ?? 'default' }));
    if (!this.throttlers.length) {
      this.logger.warn(
        'No throttlers are configured, so no request is limited. Provide at least one entry to ThrottlerModule.forRoot() or return one from ThrottlerModule.forRootAsync().',
      );
    }
    if (Array.isArray(this.options)) {
      this.commonOptions = {};
    } else {
      const { skipIf, ignoreUserAgents, getTracker, generateKey, setHeaders } = this.options;
      this.commonOptions = { skipIf, ignoreUserAgents, getTracker, generateKey, setHeaders };
      this.ipv6SubnetPrefix = this.options.ipv6SubnetPrefix ?? DEFAULT_IPV6_SUBNET_PREFIX;
    }
    this.commonOptions.getTracker ??= this.getTracker.bind(this);
    const patterns = [
      this.commonOptions.ignoreUserAgents,
      ...this.throttlers.map((t) => t.ignoreUserAgents),
    ];
    this.statefulPatterns = [
      ...new Set(
        patterns.flatMap((list) =>
          Array.isArray(list)
            ? list.filter((p) => p instanceof RegExp && (p.global || p.sticky))
            : [],
        ),
      ),
    ];
    this.commonOptions.generateKey ??= this.generateKey.bind(this);
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (await this.shouldSkip(context)) return true;
    const storage = this.storageService;
    if (
      storage instanceof EngineStorage &&
      // Our storage's own increment (not a subclass's override), our own handleRequest.
      storage.increment === EngineStorage.prototype.increment &&
      this.handleRequest === ThrottlerGuard.prototype.handleRequest
    ) {
      return this.handleRequests(context, storage);
    }
    // Throttler by throttler, each resolved just before it is counted, as the throttler does.
    const continues: boolean[] = [];
    for (const throttler of this.throttlers) {
      const request = await this.resolve(context, throttler);
      if (request === undefined) continue;
      continues.push(await handling(context, this.admits, () => this.handleRequest(request)));
    }
    return continues.every(Boolean);
  }

  /** Return true to let the request through untouched, before any throttler. */
  protected async shouldSkip(_context: ExecutionContext): Promise<boolean> {
    return false;
  }

  /**
   * One throttler's hit, counted alone in the storage (the throttler's own flow). With one of
   * this package's storages, as on the guard's own path: a throttler without
   * `blockDuration` is counted without a block (refused until its window ends,
   * nestjs/throttler#2208), and a store that fails admits, logged.
   */
  protected async handleRequest(requestProps: ThrottlerRequest): Promise<boolean> {
    const { context, limit, ttl, throttler, getTracker, generateKey } = requestProps;
    const { req, res } = this.getRequestResponse(context);
    if (this.ignoresUserAgent(throttler, req)) return true;
    const tracker = await getTracker(req, context);
    const key = generateKey(context, tracker, throttler.name!);
    const ours = this.storageService instanceof EngineStorage;
    const blockDuration = ours && blockUnset(requestProps) ? 0 : requestProps.blockDuration;
    // Our storages' increment admits a failed store call itself, logged.
    const record = await this.storageService.increment(
      key,
      ttl,
      limit,
      blockDuration,
      throttler.name!,
    );
    await this.answer(requestProps, res, tracker, key, record);
    return true;
  }

  /**
   * Every throttler of a request in one atomic call of this package's storage: admitted only
   * if every throttler admits, and then counted under each. Headers and the refusal as the
   * throttler writes them, in the throttlers' order. When the store fails, the request is
   * admitted and the failure logged (`rate_limit.backend_error`, at most once per 10 s).
   *
   * The user's functions run in the throttler's order and stop where it stops: a function
   * that throws (a setting, `skipIf`, `getTracker`, `generateKey`) refuses the request with
   * its error once the throttlers before it are decided (a refusal among those answers
   * first); after a refusal, the `ignoreUserAgents` patterns of later throttlers are left as
   * the throttler leaves them (a `/g` or `/y` pattern's `lastIndex`).
   */
  protected async handleRequests(
    context: ExecutionContext,
    storage: EngineStorage,
  ): Promise<boolean> {
    const { req, res } = this.getRequestResponse(context);
    const counted: Counted[] = [];
    const patterns = this.statefulPatterns;
    let failure: { error: unknown } | undefined;
    for (const throttler of this.throttlers) {
      try {
        const request = await this.resolve(context, throttler);
        if (request === undefined || this.ignoresUserAgent(throttler, req)) continue;
        const tracker = await request.getTracker(req, context);
        const key = request.generateKey(context, tracker, throttler.name!);
        const { ttl, limit } = request;
        // No blockDuration set: refused until the window ends, not for a whole ttl from the
        // refusal (nestjs/throttler#2208: up to twice the ttl).
        const blockDuration = blockUnset(request) ? 0 : request.blockDuration;
        counted.push({
          request,
          tracker,
          hit: { key, ttl, limit, blockDuration, throttlerName: throttler.name! },
          lastIndexes: patterns.length ? patterns.map((p) => p.lastIndex) : undefined,
        });
      } catch (error) {
        failure = { error };
        break;
      }
    }
    if (counted.length > 0) await this.decideAll(counted, storage, res, patterns);
    if (failure) throw failure.error;
    return true;
  }

  /** The decision of `counted` in one store call, answered throttler by throttler. */
  private async decideAll(
    counted: readonly Counted[],
    storage: EngineStorage,
    res: ThrottlerRecord | undefined,
    patterns: readonly RegExp[],
  ): Promise<void> {
    let records: ThrottlerStorageRecord[];
    try {
      records = await storage.decide(counted.map((c) => c.hit));
    } catch (error) {
      if (this.failures.admits(error)) return;
      throw error;
    }
    // The throttler stops at its first refusal: the patterns as that throttler left them.
    const refusal = counted[records.findIndex((record) => record.isBlocked)];
    refusal?.lastIndexes?.forEach((lastIndex, i) => (patterns[i]!.lastIndex = lastIndex));
    for (let i = 0; i < counted.length; i++) {
      const { request, tracker, hit } = counted[i]!;
      await this.answer(request, res, tracker, hit.key, records[i]!);
    }
  }

  /**
   * One throttler of the request, resolved (undefined when skipped).
   * @throws what the throttler throws: a setting, or `skipIf`, that throws or gives no number
   */
  private resolve(
    context: ExecutionContext,
    throttler: ThrottlerOptions,
  ): Promise<ThrottlerRequest | undefined> {
    return throttlerRequest(context, throttler, this.commonOptions, this.reflector);
  }

  /**
   * The default tracker: the client's address (`req.ip`), IPv6 by its /64 (see `normalizeIp`).
   * On a graphql-ws subscription (no `req.ip`), the client address of the connection's upgrade
   * request (`req.extra.request`) as the app's platform gives it for an HTTP request: behind a
   * proxy the app trusts (Express `trust proxy`, Fastify `trustProxy`), the forwarded client;
   * otherwise the socket's peer, whatever `X-Forwarded-For` says. A connection without an
   * address is a client of its own (see `trackerOf`).
   */
  protected async getTracker(req: ThrottlerRecord): Promise<string> {
    return trackerOf(req, this.ipv6SubnetPrefix, this.platformAddress());
  }

  /** The platform's address getter, looked up once the app's adapter is there. */
  private platformAddress(): AddressOf | undefined {
    if (this.addressOf === undefined) {
      const adapter = this.platformHost?.httpAdapter;
      // Before the adapter exists (a guard used before the app is created): look again later.
      if (adapter === undefined || adapter === null) return undefined;
      this.addressOf = platformAddress(adapter.getInstance()) ?? null;
    }
    return this.addressOf ?? undefined;
  }

  /**
   * Writes a header on the response, when there is one that takes headers (Express
   * `header`, Node's `setHeader`); silently does nothing otherwise (a GraphQL context
   * without a response: nestjs/throttler#2382).
   */
  protected setResponseHeader(
    res: ThrottlerRecord | undefined,
    name: string,
    value: string | number,
  ): void {
    if (typeof res?.header === 'function') res.header(name, value);
    else if (typeof res?.setHeader === 'function') res.setHeader(name, value);
  }

  /**
   * The request and response of an HTTP context; of a GraphQL one, those of its context
   * object (`req`/`res`, or Fastify's `request`/`reply`), so the guard works on resolvers
   * without a subclass. Either may be undefined.
   */
  protected getRequestResponse(context: ExecutionContext): {
    req: ThrottlerRecord;
    res: ThrottlerRecord;
  } {
    return requestResponseOf(context);
  }

  /** The budget's key: class, handler and throttler name, with the tracker, hashed. */
  protected generateKey(context: ExecutionContext, suffix: string, name: string): string {
    const prefix = `${context.getClass().name}-${context.getHandler().name}-${name}`;
    return sha256(`${prefix}-${suffix}`);
  }

  /** Throws the 429 ({@link ThrottlerException} with `getErrorMessage`'s message). */
  protected async throwThrottlingException(
    context: ExecutionContext,
    throttlerLimitDetail: ThrottlerLimitDetail,
  ): Promise<void> {
    throw new ThrottlerException(await this.getErrorMessage(context, throttlerLimitDetail));
  }

  /** The module's `errorMessage` (a string, or a function of the refusal), else the default. */
  protected async getErrorMessage(
    context: ExecutionContext,
    throttlerLimitDetail: ThrottlerLimitDetail,
  ): Promise<string> {
    if (Array.isArray(this.options) || !this.options.errorMessage) return this.errorMessage;
    return typeof this.options.errorMessage === 'function'
      ? this.options.errorMessage(context, throttlerLimitDetail)
      : this.options.errorMessage;
  }

  /** The headers of one throttler's record, and its refusal. */
  private async answer(
    request: ThrottlerRequest,
    res: ThrottlerRecord | undefined,
    tracker: string,
    key: string,
    record: ThrottlerStorageRecord,
  ): Promise<void> {
    const { context, limit, ttl, throttler } = request;
    const suffix = throttler.name === 'default' ? '' : `-${throttler.name}`;
    const setHeaders = throttler.setHeaders ?? this.commonOptions.setHeaders ?? true;
    if (record.isBlocked) {
      if (setHeaders) this.setResponseHeader(res, `Retry-After${suffix}`, record.timeToBlockExpire);
      await this.throwThrottlingException(context, { limit, ttl, key, tracker, ...record });
    }
    if (setHeaders) {
      this.setResponseHeader(res, `${this.headerPrefix}-Limit${suffix}`, limit);
      this.setResponseHeader(
        res,
        `${this.headerPrefix}-Remaining${suffix}`,
        Math.max(0, limit - record.totalHits),
      );
      this.setResponseHeader(res, `${this.headerPrefix}-Reset${suffix}`, record.timeToExpire);
    }
  }

  private ignoresUserAgent(throttler: ThrottlerOptions, req: ThrottlerRecord | undefined): boolean {
    return userAgentIgnored(throttler.ignoreUserAgents ?? this.commonOptions.ignoreUserAgents, req);
  }
}
