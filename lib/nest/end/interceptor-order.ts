import { Inject } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { NEST_METADATA } from '../declare/metadata.js';
import { RateLimitSettleInterceptor } from './settle.interceptor.js';

/**
 * Puts `RateLimitSettleInterceptor` first among a class's own interceptors when a handler of
 * the class carries it: Nest runs a class's interceptors before its handlers', and
 * one of them that throws would end the call before ours ran, its concurrency slots held
 * until their lease (on WebSockets and the other handler-bound transports nothing else tells
 * that the call ended). Ours then runs for the class's other handlers too, passing them
 * through. The decorators already put it first among a handler's own; app-wide interceptors
 * (`useGlobalInterceptors`, `APP_INTERCEPTOR`) still run before it.
 *
 * In a constructor: Nest reads interceptors when it binds routes, gateways and resolvers,
 * after providers exist.
 */
export class InterceptorOrder {
  constructor(
    @Inject(DiscoveryService) discovery: DiscoveryService,
    @Inject(MetadataScanner) scanner: MetadataScanner,
  ) {
    const seen = new Set<unknown>();
    for (const { metatype } of [...discovery.getControllers(), ...discovery.getProviders()]) {
      if (typeof metatype !== 'function' || seen.has(metatype)) continue;
      seen.add(metatype);
      const own = Reflect.getOwnMetadata(NEST_METADATA.interceptors, metatype) as
        unknown[] | undefined;
      if (!own?.length || own[0] === RateLimitSettleInterceptor) continue;
      const prototype = metatype.prototype as Record<string, unknown> | undefined;
      if (typeof prototype !== 'object' || prototype === null) continue;
      const settles = scanner.getAllMethodNames(prototype).some((name) => {
        const method = prototype[name];
        const interceptors =
          typeof method === 'function'
            ? (Reflect.getOwnMetadata(NEST_METADATA.interceptors, method) as unknown[] | undefined)
            : undefined;
        return interceptors?.includes(RateLimitSettleInterceptor) === true;
      });
      if (!settles) continue;
      Reflect.defineMetadata(
        NEST_METADATA.interceptors,
        [RateLimitSettleInterceptor, ...own.filter((i) => i !== RateLimitSettleInterceptor)],
        metatype,
      );
    }
  }
}
