import { NEST_METADATA } from '../declare/metadata.js';

/* eslint-disable @typescript-eslint/no-unsafe-function-type -- classes and methods of any shape */

/** `RouteParamtypes.RESPONSE` and `RouteParamtypes.NEXT` of `@nestjs/common`. */
const RESPONSE = 1;
const NEXT = 2;

/** Per controller, then per handler: an inherited handler serves several controllers. */
const known = new WeakMap<Function, WeakMap<Function, boolean>>();

/**
 * Whether the handler writes the response itself: it takes `@Res()` / `@Response()` (or
 * `@Next()`) without `passthrough`, so Nest sends nothing when it returns, and the response
 * ends whenever the handler's code gets to it (its concurrency slots are held until then).
 * Read once per route from the parameter decorators' metadata.
 */
export function ownsResponse(type: Function, handler: Function): boolean {
  let byHandler = known.get(type);
  if (byHandler === undefined) known.set(type, (byHandler = new WeakMap()));
  let owns = byHandler.get(handler);
  if (owns === undefined) {
    byHandler.set(handler, (owns = readOwnsResponse(type, handler)));
  }
  return owns;
}

function readOwnsResponse(type: Function, handler: Function): boolean {
  // Nest stores a method's parameter decorators on its class, under the method's name.
  const args = Reflect.getMetadata(NEST_METADATA.routeArgs, type, handler.name) as
    Record<string, { data?: unknown } | undefined> | undefined;
  if (args === undefined) return false;
  // As Nest decides whether to send the handler's result: `passthrough` is kept apart from
  // the parameter's own data.
  if (Reflect.getMetadata(NEST_METADATA.responsePassthrough, type, handler.name) === true) {
    return false;
  }
  return Object.keys(args).some((key) => {
    const kind = Number(key.split(':')[0]);
    return kind === RESPONSE || kind === NEXT;
  });
}
