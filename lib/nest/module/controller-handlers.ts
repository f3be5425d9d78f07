import type { DiscoveryService, MetadataScanner } from '@nestjs/core';

/* eslint-disable @typescript-eslint/no-unsafe-function-type -- classes and methods of any shape */

/** One method of a controller class, as Nest routes it. */
export interface ControllerHandler {
  readonly type: Function;
  readonly handler: Function;
}

/** Every method of every controller the app declares (inherited ones included), in order. */
export function controllerHandlers(
  discovery: DiscoveryService,
  scanner: MetadataScanner,
): ControllerHandler[] {
  const found: ControllerHandler[] = [];
  for (const { metatype } of discovery.getControllers()) {
    if (typeof metatype !== 'function') continue;
    const prototype = metatype.prototype as Record<string, unknown>;
    for (const name of scanner.getAllMethodNames(prototype)) {
      const handler = prototype[name];
      if (typeof handler === 'function') found.push({ type: metatype, handler });
    }
  }
  return found;
}
