import {
  BadRequestException,
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  Inject,
  Module,
  NotImplementedException,
  ServiceUnavailableException,
  Param,
  Put,
  Query,
  Req,
  UseGuards,
  type CanActivate,
  type DynamicModule,
  type Type,
} from '@nestjs/common';
import { quote, RateLimitBackendError, RateLimitConfigError } from '../../core/errors.js';
import type { RateInput } from '../../core/model/rate.js';
import { userIdentity } from '../../http/identities.js';
import type { RequestLike } from '../../http/ip.js';
import { RateLimit, SkipRateLimit } from '../declare/decorators.js';
import { keys } from '../declare/keys.js';
import { RateLimitService } from './rate-limit.service.js';

/** Options of {@link RateLimitAdminModule.forRoot}. */
export interface RateLimitAdminOptions {
  /** Route prefix of the endpoints. Default `'rate-limit'`. */
  path?: string;
  /**
   * **Required.** Guards that authenticate and authorise the operator, applied to every
   * endpoint as `@UseGuards(...guards)` would. These endpoints reset limits and exempt
   * identities: anyone who reaches them can switch rate limiting off. `[]` only when a
   * global guard already protects them.
   */
  guards: (Type<CanActivate> | CanActivate)[];
  /**
   * Who makes a change, written as `actor` to its audit line, from the admin request.
   * Default: the operator authenticated by `guards`, as `user:<id>` (`request.user`'s `id`,
   * `sub` or `userId`); none when there is no user. Return undefined for none.
   */
  actor?: (request: unknown) => string | undefined;
  /**
   * Failed authentications (401 and 403 from `guards`) allowed per client address before the
   * endpoints answer 429 until the budget refills (`'10/m'`, `{ limit, periodMs }`), so an
   * operator token cannot be guessed without limit. Requests the guards admit spend nothing.
   * Default `'10/m'`; `false` turns it off (a gateway in front limits them already). Needs the
   * module's global guard and a store that can refund (memory and Redis can).
   */
  failedAuthentications?: RateInput | false;
}

/** The budget of failed authentications, shared by every admin endpoint of an address. */
const AUTH_SCOPE = 'rate-limit-admin';

const MAX_IDENTITY_LENGTH = 1024;

/**
 * JSON endpoints for operators, over {@link RateLimitService}. Not mounted unless imported,
 * next to `RateLimitModule`:
 *
 * ```ts
 * RateLimitAdminModule.forRoot({ path: 'internal/rate-limit', guards: [AdminGuard] })
 * ```
 *
 * | method and path                    | does                                                      |
 * | ---------------------------------- | --------------------------------------------------------- |
 * | `GET /:identity`                   | inspect                                                   |
 * | `DELETE /:identity?scope=`         | reset (every scope without `scope`)                       |
 * | `GET /:identity/overrides`         | overrides and exemption in force                          |
 * | `PUT /:identity/overrides`         | body `{ scope, policy?, rate, ttlMs, reason, burst? }`    |
 * | `DELETE /:identity/overrides?scope=&policy=` | ends an override                                |
 * | `PUT /:identity/exemption`         | body `{ ttlMs, reason }`                                  |
 * | `DELETE /:identity/exemption`      | ends the exemption                                        |
 *
 * The endpoints are themselves exempt from rate limiting (`@SkipRateLimit()`): an operator
 * must be able to act during the incident that tripped the limits. Bad input answers 400.
 */
@Module({})
export class RateLimitAdminModule {
  /** @throws {RateLimitConfigError} `ERR_RATE_LIMIT_ADMIN_OPTION` for a missing `guards` or a bad `path` */
  static forRoot(options: RateLimitAdminOptions): DynamicModule {
    const where = 'RateLimitAdminModule';
    const {
      path = 'rate-limit',
      guards,
      // The user on Fastify's raw request too, where Nest middleware puts it.
      actor = (request: unknown) => {
        try {
          return userIdentity((request as RequestLike).user ?? (request as RequestLike).raw?.user);
        } catch {
          // A user whose id spells nothing: the audit line goes without an actor.
          return undefined;
        }
      },
    } = options ?? ({} as RateLimitAdminOptions);
    if (
      !Array.isArray(guards) ||
      guards.some((g) => g === null || (typeof g !== 'function' && typeof g !== 'object'))
    ) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_ADMIN_OPTION',
        `invalid guards ${quote(guards)}: these endpoints reset limits and exempt identities, so give the guards that authenticate operators (or [] when a global guard does)`,
        where,
      );
    }
    if (typeof actor !== 'function') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_ADMIN_OPTION',
        `invalid actor ${quote(actor)}: expected a function of the request`,
        where,
      );
    }
    if (typeof path !== 'string' || !/^[A-Za-z0-9_./-]{1,200}$/.test(path)) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_ADMIN_OPTION',
        `invalid path ${quote(path)}: use 1-200 of A-Z a-z 0-9 _ . / -`,
        where,
      );
    }
    const failed = options?.failedAuthentications ?? '10/m';
    const controller = adminController(path, guards, actor);
    if (failed !== false) {
      // Decided before the operator's guards (the key reads no user), kept only for what
      // they refuse: a guess costs one unit, an operator's request nothing.
      RateLimit(failed, {
        name: 'failed-authentication',
        // An identity of its own per address: the app's `ip:` budgets, and what an
        // operator inspects or resets of them, stay apart from these.
        key: keys.withoutUser((_ctx, { ip }) => `admin-auth:${ip()}`),
        scope: AUTH_SCOPE,
        count: 'failed',
        failed: (status) => status === 401 || status === 403,
        exposeDetails: false,
        headers: false,
      })(controller);
    }
    return { module: RateLimitAdminModule, controllers: [controller] };
  }
}

interface OverrideBody {
  scope?: unknown;
  policy?: unknown;
  rate?: unknown;
  ttlMs?: unknown;
  reason?: unknown;
  burst?: unknown;
}

function adminController(
  path: string,
  guards: RateLimitAdminOptions['guards'],
  actorOf: NonNullable<RateLimitAdminOptions['actor']>,
): Type {
  @Controller(path)
  @UseGuards(...guards)
  // No module default or other limit here: operators act while limits are tripping.
  @SkipRateLimit()
  class RateLimitAdminController {
    constructor(@Inject(RateLimitService) private readonly service: RateLimitService) {}

    @Get(':identity')
    inspect(@Param('identity') identity: string, @Query('scope') scope?: string) {
      return run(async () => ({
        policies: await this.service.inspect(checked(identity), optional(scope, 'scope')),
      }));
    }

    @Delete(':identity')
    reset(@Param('identity') identity: string, @Query('scope') scope?: string) {
      return run(async () => ({
        deleted: await this.service.reset(checked(identity), optional(scope, 'scope')),
      }));
    }

    @Get(':identity/overrides')
    overrides(@Param('identity') identity: string) {
      return run(() => this.service.listOverrides(checked(identity)));
    }

    @Put(':identity/overrides')
    @HttpCode(200)
    setOverride(
      @Param('identity') identity: string,
      @Body() body: OverrideBody,
      @Req() request: unknown,
    ) {
      return run(async () => {
        const b = objectBody(body) as OverrideBody;
        if (b.scope === undefined)
          throw new BadRequestException('scope is required ("*" for every scope)');
        await this.service.setOverride(checked(identity), b.scope as string, b.rate as RateInput, {
          policy: b.policy as string | undefined,
          ttlMs: b.ttlMs as number,
          reason: b.reason as string,
          burst: b.burst as number | undefined,
          actor: actorOf(request),
        });
        return this.service.listOverrides(identity);
      });
    }

    @Delete(':identity/overrides')
    removeOverride(
      @Param('identity') identity: string,
      @Query('scope') scope?: string,
      @Query('policy') policy?: string,
      @Req() request?: unknown,
    ) {
      return run(async () => {
        if (scope === undefined)
          throw new BadRequestException('query parameter scope is required ("*" for every scope)');
        const removed = await this.service.removeOverride(
          checked(identity),
          optional(scope, 'scope')!,
          {
            policy: optional(policy, 'policy'),
            actor: actorOf(request),
          },
        );
        return { removed };
      });
    }

    @Put(':identity/exemption')
    @HttpCode(200)
    exempt(@Param('identity') identity: string, @Body() body: unknown, @Req() request: unknown) {
      return run(async () => {
        const b = objectBody(body) as { ttlMs?: unknown; reason?: unknown };
        await this.service.exempt(checked(identity), {
          ttlMs: b.ttlMs as number,
          reason: b.reason as string,
          actor: actorOf(request),
        });
        return this.service.listOverrides(identity);
      });
    }

    @Delete(':identity/exemption')
    removeExemption(@Param('identity') identity: string, @Req() request: unknown) {
      return run(async () => ({
        removed: await this.service.removeExemption(checked(identity), {
          actor: actorOf(request),
        }),
      }));
    }
  }
  return RateLimitAdminController;
}

/** Runs an endpoint, turning invalid input into 400 with the validation message. */
async function run<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof RateLimitConfigError) {
      // A store without inspect or control is the server's limitation, not bad input.
      if (error.code === 'ERR_RATE_LIMIT_STORE_UNSUPPORTED')
        throw new NotImplementedException(error.detail);
      throw new BadRequestException(error.detail);
    }
    if (error instanceof RateLimitBackendError) {
      throw new ServiceUnavailableException('the rate-limit store did not answer');
    }
    throw error;
  }
}

function checked(identity: unknown): string {
  if (typeof identity !== 'string' || identity === '' || identity.length > MAX_IDENTITY_LENGTH) {
    throw new BadRequestException(`identity must be 1-${MAX_IDENTITY_LENGTH} characters`);
  }
  return identity;
}

/** A query parameter given at most once. */
function optional(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new BadRequestException(`${name} must be given once`);
  return value;
}

function objectBody(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new BadRequestException('expected a JSON object body (Content-Type: application/json)');
  }
  return body as Record<string, unknown>;
}
