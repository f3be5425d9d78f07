import type { ExecutionContext } from '@nestjs/common';
import { httpTransport } from './http.js';
import type { Transport } from './transport.js';

/**
 * Every transport adapter. Adding one: its file beside this one (see `transport.ts`), its
 * import above, and a line here. Contexts of any other type pass the guard untouched.
 */
const TRANSPORTS: readonly Transport[] = [
  httpTransport,
  // one line per adapter
];

const byType = new Map<string, Transport>(TRANSPORTS.map((t) => [t.type, t]));
/** Adapters whose peer is loaded (or that have none to load). */
const ready = new WeakSet<Transport>();
/** The first load of each adapter's peer, shared by every call that meets it meanwhile. */
const loading = new WeakMap<Transport, Promise<Transport>>();

/**
 * The adapter of this context, its optional peer not necessarily loaded: for reading the
 * request and the user, which need no peer. Undefined for a context no adapter serves.
 */
export function adapterOf(ctx: ExecutionContext): Transport | undefined {
  return byType.get(ctx.getType());
}

/**
 * The adapter of this context with its optional peer loaded, for the guard. A promise only
 * until that first load settles (it rejects, every time, when the peer is missing); then
 * the adapter itself, so a request awaits nothing here. Undefined for a context no adapter
 * serves.
 */
export function transportOf(ctx: ExecutionContext): Transport | Promise<Transport> | undefined {
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
}
