/**
 * The client address of a Node request that never went through the app's platform (a
 * WebSocket upgrade request, which the platform's router never sees), read by the platform's
 * own `ip` getter, so it honours the app's proxy trust exactly as an HTTP request on the same
 * app would: Express's `req.ip` (`proxy-addr` under `app.get('trust proxy fn')`), Fastify's
 * `request.ip` (`@fastify/proxy-addr` under its `trustProxy` option). Without trust, both give
 * the socket's peer address, whatever `X-Forwarded-For` says.
 */

/** A Node request's fields that the platforms read for the address. */
export interface NodeRequest {
  headers: unknown;
  socket: unknown;
}

/** The client address of a request, as the platform finds it; `undefined` if it finds none. */
export type AddressOf = (request: NodeRequest) => string | undefined;

type Obj = Record<PropertyKey, unknown>;

const isObject = (value: unknown): value is Obj =>
  (typeof value === 'object' || typeof value === 'function') && value !== null;

/** Whether `prototype`, or an object up its chain, defines `name` as a getter. */
function hasGetter(prototype: object, name: string): boolean {
  for (let at: object | null = prototype; at !== null; at = Object.getPrototypeOf(at) as object) {
    const descriptor = Object.getOwnPropertyDescriptor(at, name);
    if (descriptor) return typeof descriptor.get === 'function';
  }
  return false;
}

/**
 * Express: `app.request` is the prototype Express gives every request of the app (it holds
 * `app`, so its `ip` getter reads the app's `trust proxy fn`). The view carries the upgrade
 * request's headers and socket (`connection` too, for `forwarded` before 0.2).
 */
function expressAddress(app: Obj): AddressOf | undefined {
  const prototype = app.request;
  if (!isObject(prototype) || prototype.app !== app || !hasGetter(prototype, 'ip')) {
    return undefined;
  }
  return (request) => {
    const { headers, socket } = request;
    const view = Object.create(prototype, {
      headers: { value: headers },
      socket: { value: socket },
      connection: { value: socket },
    }) as Obj;
    return view.ip as string | undefined;
  };
}

/**
 * Fastify: the instance's request class (built once from its `trustProxy` option; Fastify keeps
 * it under the `fastify.Request` symbol and exposes the option nowhere else). Its `ip` getter
 * reads only `raw`, the Node request.
 */
function fastifyAddress(instance: Obj): AddressOf | undefined {
  const symbol = Object.getOwnPropertySymbols(instance).find(
    (s) => s.description === 'fastify.Request',
  );
  const Request = symbol === undefined ? undefined : instance[symbol];
  const prototype = typeof Request === 'function' ? (Request.prototype as unknown) : undefined;
  if (!isObject(prototype) || !hasGetter(prototype, 'ip')) return undefined;
  return (request) => {
    const view = Object.create(prototype, { raw: { value: request } }) as Obj;
    return view.ip as string | undefined;
  };
}

/**
 * How the platform instance (`HttpAdapterHost.httpAdapter.getInstance()`) finds a request's
 * client address: an Express app's or a Fastify instance's own `ip` getter. `undefined` for
 * any other platform (the caller keeps the socket's address).
 */
export function platformAddress(instance: unknown): AddressOf | undefined {
  if (!isObject(instance)) return undefined;
  return expressAddress(instance) ?? fastifyAddress(instance);
}
