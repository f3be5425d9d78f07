/**
 * Choosing a transport adapter (issue 12, item 1): one lookup by `ctx.getType()`, an
 * optional peer loaded on the first context that needs it and never before, and a missing
 * peer reported on every call rather than retried.
 */
import { describe, expect, it } from '@jest/globals';
import type { ExecutionContext } from '@nestjs/common';
import { httpTransport } from '../../lib/nest/transports/http.js';
import { transportsOf } from '../../lib/nest/transports/registry.js';
import type { Transport } from '../../lib/nest/transports/transport.js';

const contextOf = (type: string) => ({ getType: () => type }) as unknown as ExecutionContext;

/** A transport of `type` whose `load` imports `specifier`, counting its loads. */
function withPeer(type: string, specifier: string): Transport & { loads: number } {
  const transport = {
    ...httpTransport,
    type,
    loads: 0,
    async load() {
      transport.loads++;
      await import(specifier);
    },
  };
  return transport;
}

describe('transportsOf', () => {
  it('answers an adapter without a peer at once, and nothing for a type without one', () => {
    const transports = transportsOf([httpTransport]);
    expect(transports.transportOf(contextOf('http'))).toBe(httpTransport);
    expect(transports.adapterOf(contextOf('http'))).toBe(httpTransport);
    for (const type of ['ws', 'rpc', 'graphql']) {
      expect(transports.transportOf(contextOf(type))).toBeUndefined();
      expect(transports.adapterOf(contextOf(type))).toBeUndefined();
    }
  });

  it('loads a peer once, on the first context of its type, then answers at once', async () => {
    const ws = withPeer('ws', 'node:zlib');
    const transports = transportsOf([httpTransport, ws]);
    transports.transportOf(contextOf('http'));
    expect(ws.loads).toBe(0);
    // The request and the user need no peer: reading them loads nothing.
    expect(transports.adapterOf(contextOf('ws'))).toBe(ws);
    expect(ws.loads).toBe(0);
    const first = transports.transportOf(contextOf('ws'));
    const meanwhile = transports.transportOf(contextOf('ws'));
    expect(first).toBeInstanceOf(Promise);
    expect(meanwhile).toBe(first);
    await expect(first).resolves.toBe(ws);
    expect(transports.transportOf(contextOf('ws'))).toBe(ws);
    expect(ws.loads).toBe(1);
  });

  it('a missing peer rejects on every call, and is not imported again', async () => {
    const rpc = withPeer('rpc', 'nest-rate-limit-test-no-such-peer');
    const transports = transportsOf([rpc]);
    await expect(transports.transportOf(contextOf('rpc'))).rejects.toThrow(
      'nest-rate-limit-test-no-such-peer',
    );
    await expect(transports.transportOf(contextOf('rpc'))).rejects.toThrow(
      'nest-rate-limit-test-no-such-peer',
    );
    expect(rpc.loads).toBe(1);
  });

  it('a later adapter of the same type replaces an earlier one', () => {
    const replacement = { ...httpTransport };
    expect(transportsOf([httpTransport, replacement]).adapterOf(contextOf('http'))).toBe(
      replacement,
    );
  });
});
