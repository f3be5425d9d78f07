import type { ExecutionContext } from '@nestjs/common';
import { graphqlTransport } from './graphql.js';
import { httpTransport } from './http.js';
import { rpcTransport } from './rpc.js';
import type { Transport } from './transport.js';
import { wsTransport } from './ws.js';

/**
 * Every transport adapter. Adding one: its file beside this one (see `transport.ts`), its
 * import above, and a line here. Contexts of any other type pass the guard untouched.
 */
const TRANSPORTS: readonly Transport[] = [
  httpTransport,
  graphqlTransport,
  wsTransport,
  rpcTransport,
  // one line per adapter
];

/** Finds the adapter of a context; see {@link transportsOf}. */
export interface Transports {
  /**
   * The adapter of this context, its optional peer not necessarily loaded: for reading the
   * request and the user, which need no peer. Undefined for a context no adapter serves.
   */
  adapterOf(ctx: ExecutionContext): Transport | undefined;
  /**
   * The adapter of this context with its optional peer loaded, for the guard. A promise only
   * until that first load settles (it rejects, every time, when the peer is missing); then
   * the adapter itself, so a request awaits nothing here. Undefined for a context no adapter
   * serves.
   */
  transportOf(ctx: ExecutionContext): Transport | Promise<Transport> | undefined;
}

/** Adapters keyed by `type`, one lookup per call; a later adapter of the same type wins. */
export function transportsOf(transports: readonly Transport[]): Transports {
  const byType = new Map<string, Transport>(transports.map((t) => [t.type, t]));
  /** Adapters whose peer is loaded. */
  const ready = new WeakSet<Transport>();
  /** The first load of each adapter's peer, shared by every call that meets it meanwhile. */
  const loading = new WeakMap<Transport, Promise<Transport>>();
  return {
    adapterOf: (ctx) => byType.get(ctx.getType()),
    transportOf(ctx) {
      const transport = byType.get(ctx.getType());
      if (transport?.load === undefined || ready.has(transport)) return transport;
      let loaded = loading.get(transport);
      if (loaded === undefined) {
        loaded = transport.load().then(() => {
          ready.add(transport);
          return transport;
        });
        loading.set(transport, loaded);
      }
      return loaded;
    },
  };
}

const registry = transportsOf(TRANSPORTS);

/** {@link Transports.adapterOf} over every adapter of the package. */
export const adapterOf = registry.adapterOf;

/** {@link Transports.transportOf} over every adapter of the package. */
export const transportOf = registry.transportOf;

/** Whether calls of this context type (`ctx.getType()`) are limited: some adapter serves it. */
export function isLimitedType(type: string): boolean {
  return TRANSPORTS.some((t) => t.type === type);
}
