/**
 * Mercurius requires `@fastify/static`, which requires `content-disposition@3`, an ES module:
 * Node 20 can `require` it, Jest's module runtime cannot (before Node 24.9). This imports it
 * as the ES module it is and registers it for `require`. Await it before `mercurius` loads.
 */
import { createRequire } from 'node:module';
import { jest } from '@jest/globals';

export async function loadableMercurius(): Promise<void> {
  const require = createRequire(import.meta.url);
  const path = createRequire(require.resolve('@fastify/static')).resolve('content-disposition');
  jest.setMock(path, (await import(path)) as object);
}
