import { Inject } from '@nestjs/common';
import { DiscoveryService, HttpAdapterHost, MetadataScanner } from '@nestjs/core';
import { INCLUDE_UPLOAD_METADATA, NEST_METADATA } from '../declare/metadata.js';
import { decideOnArrival, type Decider } from '../pipeline/before-body.js';
import { RateLimitGuard } from '../pipeline/rate-limit.guard.js';
import { appGuardSubclass } from './bootstrap.js';
import { controllerHandlers } from './controller-handlers.js';
import { RoutePlanner } from '../plan/planner.js';
import { isConcurrency } from '../plan/rules.js';

/* eslint-disable @typescript-eslint/no-unsafe-function-type -- classes and methods of any shape */

/**
 * Installs the hooks that decide the routes of `@ConcurrencyLimit(n, { includeUpload: true })`
 * as their requests arrive, before their bodies are read (see `pipeline/before-body.ts`).
 * Nothing is installed for an app without such a route.
 *
 * - Fastify: an `onRequest` hook on those routes (added from an `onRoute` hook), which runs
 *   before the content-type parser.
 * - Express: a middleware ahead of Nest's body parsers (which Nest registers when the app
 *   initialises, after the providers exist), which finds the request's route as the router
 *   would, once more, and decides only those routes. Body parsers the app registered itself
 *   before creating the Nest app still run first.
 *
 * In a constructor: Nest registers its body parsers and routes after providers exist.
 */
export class BeforeBodySetup {
  private decider: Decider | undefined;

  constructor(
    @Inject(DiscoveryService) private readonly discovery: DiscoveryService,
    @Inject(MetadataScanner) scanner: MetadataScanner,
    @Inject(RoutePlanner) runtime: RoutePlanner,
    @Inject(RateLimitGuard) private readonly own: RateLimitGuard,
    @Inject(HttpAdapterHost) adapterHost: HttpAdapterHost,
  ) {
    let marked = 0;
    for (const { type, handler } of controllerHandlers(discovery, scanner)) {
      if (!includesUpload(runtime, type, handler)) continue;
      // Nest copies a handler's metadata onto the function it routes to: how the hooks
      // know the route. An inherited handler may serve several controllers.
      const routes = (Reflect.getOwnMetadata(BEFORE_BODY, handler) ?? []) as EarlyRoute[];
      if (!routes.some((r) => r.type === type)) routes.push({ type, handler });
      Reflect.defineMetadata(BEFORE_BODY, routes, handler);
      marked++;
    }
    if (marked === 0) return;
    const app = adapterHost.httpAdapter?.getInstance?.() as unknown;
    if (isFastify(app)) this.onFastify(app);
    else if (isExpress(app)) this.onExpress(app);
  }

  /**
   * Decides the call; resolves true to read the body and go on.
   * @param routed what Nest routes to (named `Controller.method`), carrying the marks
   */
  private decide(routes: EarlyRoute[], routed: Function, request: object, response: object) {
    // Inherited by several controllers: told apart by the name Nest gives what it routes to.
    const { type, handler } =
      routes.length === 1
        ? routes[0]!
        : (routes.find((r) => routed.name.startsWith(`${r.type.name}.`)) ?? routes[0]!);
    return decideOnArrival(this.deciding(), type, handler, request, response);
  }

  /** The guard that decides calls: the module's, or the app's subclass it stands aside for. */
  private deciding(): Decider {
    if (this.decider) return this.decider;
    const subclass = this.own.standAside ? appGuardSubclass(this.discovery, this.own) : undefined;
    return (this.decider = subclass ?? this.own);
  }

  private onFastify(app: FastifyLike): void {
    app.addHook('onRoute', (route) => {
      const routes = Reflect.getMetadata(BEFORE_BODY, route.handler) as EarlyRoute[] | undefined;
      if (routes === undefined) return;
      const routed = route.handler;
      const arrive = (request: object, reply: object) =>
        this.decide(routes, routed, request, reply).then((go) => (go ? undefined : reply));
      const given = route.onRequest;
      route.onRequest = [
        ...(given === undefined ? [] : Array.isArray(given) ? given : [given]),
        arrive,
      ];
    });
  }

  private onExpress(app: ExpressLike): void {
    let routes: RouteLayer[] | undefined;
    /** The layers of routes decided early: a request none of them matches goes on at once. */
    let marked: RouteLayer[] = [];
    app.use((request: ExpressRequest, response: object, next: (error?: unknown) => void) => {
      let routed: Function | undefined;
      try {
        // Read once the app has its routes: the first request comes after Nest's init.
        if (routes === undefined) {
          routes = routeLayers(app);
          marked = routes.filter((layer) => {
            const handle = handleOf(layer);
            return handle !== undefined && Reflect.hasMetadata(BEFORE_BODY, handle);
          });
        }
        // No single early route matches (none, or two: the full walk finds no single one
        // then either): nothing to decide here. Else every layer, for the one-route check.
        if (routeOf(marked, request) === undefined) return next();
        routed = routeOf(routes, request);
      } catch {
        // A router of a shape we do not know: the guard decides, after the body, as without
        // includeUpload (never a 500 from here).
        return next();
      }
      const early =
        routed && (Reflect.getMetadata(BEFORE_BODY, routed) as EarlyRoute[] | undefined);
      if (early === undefined) return next();
      this.decide(early, routed!, request, response).then((go) => go && next(), next);
    });
  }
}

/** Metadata key on a handler (and what Nest routes to): the routes it is decided early for. */
const BEFORE_BODY = 'nest-rate-limit:before-body';

/** A controller and its handler method (not what Nest routes to: a plan is the method's). */
type EarlyRoute = { type: Function; handler: Function };

/** Whether an HTTP route has a concurrency limit declared with `includeUpload` in force. */
function includesUpload(runtime: RoutePlanner, type: Function, handler: Function): boolean {
  if (Reflect.getMetadata(NEST_METADATA.route, handler) === undefined) return false;
  const names = new Set<string>();
  for (let c: unknown = type; typeof c === 'function' && c !== Function.prototype;) {
    for (const n of (Reflect.getOwnMetadata(INCLUDE_UPLOAD_METADATA, c) ?? []) as string[])
      names.add(n);
    c = Object.getPrototypeOf(c);
  }
  for (const n of (Reflect.getOwnMetadata(INCLUDE_UPLOAD_METADATA, handler) ?? []) as string[])
    names.add(n);
  if (names.size === 0) return false;
  try {
    const { enforced, shadowed } = runtime.routeOf(type, handler);
    return [...enforced, ...shadowed].some((r) => isConcurrency(r.policy) && names.has(r.name));
  } catch {
    // Reported by RouteCheck, which also fails the start.
    return false;
  }
}

type FastifyRoute = { handler: Function; onRequest?: unknown };
type FastifyLike = { addHook(name: 'onRoute', hook: (route: FastifyRoute) => void): unknown };

function isFastify(app: unknown): app is FastifyLike {
  const a = app as { addHook?: unknown; route?: unknown; register?: unknown } | null;
  return typeof a?.addHook === 'function' && typeof a.register === 'function';
}

type ExpressRequest = { method: string; path: string };
type RouteLayer = {
  match(path: string): unknown;
  /** Express 5 names it `_handlesMethod`, Express 4 (NestJS 10) `_handles_method`. */
  route?: {
    _handlesMethod?(method: string): boolean;
    _handles_method?(method: string): boolean;
    stack: { handle: Function }[];
  };
};
type ExpressLike = {
  use(middleware: (req: ExpressRequest, res: object, next: (e?: unknown) => void) => void): void;
  _router?: { stack: RouteLayer[] };
  router?: { stack: RouteLayer[] };
};

function isExpress(app: unknown): app is ExpressLike {
  const a = app as { use?: unknown; set?: unknown } | null;
  return typeof a?.use === 'function' && typeof a.set === 'function';
}

/** The route layers of the app's router, in order (Express 5 `router`, Express 4 `_router`). */
function routeLayers(app: ExpressLike): RouteLayer[] {
  const router = app._router ?? app.router;
  return (router?.stack ?? []).filter((layer) => layer.route !== undefined);
}

/**
 * The handler of the one route that matches the method and path; undefined when none does, or
 * more than one (versions, hosts): which of those runs is Nest's to choose, after this, so no
 * early decision is made there (an early refusal would be another route's).
 */
function routeOf(routes: readonly RouteLayer[], request: ExpressRequest): Function | undefined {
  let found: Function | undefined;
  for (const layer of routes) {
    const route = layer.route!;
    const handles = route._handlesMethod ?? route._handles_method;
    if (!handles!.call(route, request.method) || !layer.match(request.path)) continue;
    if (found !== undefined) return undefined;
    found = handleOf(layer);
  }
  return found;
}

/** What a route layer calls last: the handler Nest registered for the route. */
function handleOf(layer: RouteLayer): Function | undefined {
  return layer.route!.stack.at(-1)?.handle;
}
