import type { ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError, quote } from '../../core/errors.js';
import type { OverloadSettings } from '../../core/overload/options.js';
import { PROCESS_POOL } from '../../core/overload/protection.js';
import { isPriority, type Priority } from '../../core/overload/types.js';
import {
  OVERLOAD_POOL_METADATA,
  PRIORITY_METADATA,
  SKIP_LOAD_SHEDDING_METADATA,
  type PriorityFn,
} from './decorators.js';

/* eslint-disable @typescript-eslint/no-unsafe-function-type -- classes and methods of any shape, as Nest's reflection takes them */

/** What overload protection knows of a route, read once from its decorators. */
export interface OverloadRoute {
  /** `Controller.handler`, for logs and events. */
  readonly name: string;
  /** `@SkipLoadShedding`: never shed, never counted. */
  readonly exempt: boolean;
  /** The pool its calls count in. */
  readonly pool: string;
  /** Its priority, or the function that chooses it per call. */
  readonly priority: Priority | PriorityFn;
  /** The class's (or the module's) priority, when `priority` is a function that fails. */
  readonly fallback: Priority;
}

/**
 * The overload side of each route, from `@Priority`, `@SkipLoadShedding` and `@OverloadPool`
 * on the handler, else its class, else the module's `defaultPriority` and the process pool.
 * Cached per class and handler (an inherited handler serves several classes).
 */
export class OverloadRoutes {
  private readonly routes = new WeakMap<Function, WeakMap<Function, OverloadRoute>>();

  constructor(private readonly settings: OverloadSettings) {}

  /** The route of `ctx`'s handler. */
  of(ctx: ExecutionContext): OverloadRoute {
    return this.route(ctx.getClass(), ctx.getHandler());
  }

  /**
   * The route of `handler` on `type`.
   * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OVERLOAD_OPTION` for a pool the option
   *   does not declare (at bootstrap, where every handler is read once)
   */
  route(type: Function, handler: Function): OverloadRoute {
    let byHandler = this.routes.get(type);
    const known = byHandler?.get(handler);
    if (known !== undefined) return known;
    const read = <T>(key: string): T | undefined =>
      (Reflect.getMetadata(key, handler) as T | undefined) ??
      (Reflect.getMetadata(key, type) as T | undefined);
    const name = `${type.name}.${handler.name}`;
    const pool = read<string>(OVERLOAD_POOL_METADATA) ?? PROCESS_POOL;
    if (pool !== PROCESS_POOL && !this.settings.pools.has(pool)) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OVERLOAD_OPTION',
        `unknown @OverloadPool ${quote(pool)}: declare it in overload.pools`,
        name,
      );
    }
    const onClass = Reflect.getMetadata(PRIORITY_METADATA, type) as
      Priority | PriorityFn | undefined;
    const route: OverloadRoute = {
      name,
      exempt: read<boolean>(SKIP_LOAD_SHEDDING_METADATA) === true,
      pool,
      priority: read<Priority | PriorityFn>(PRIORITY_METADATA) ?? this.settings.defaultPriority,
      fallback: isPriority(onClass) ? onClass : this.settings.defaultPriority,
    };
    if (!byHandler) this.routes.set(type, (byHandler = new WeakMap()));
    byHandler.set(handler, route);
    return route;
  }
}

/* eslint-enable @typescript-eslint/no-unsafe-function-type */
