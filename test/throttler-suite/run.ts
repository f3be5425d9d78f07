import { jest } from '@jest/globals';
import { setSuiteStore, type SuiteStore } from './store.js';

/**
 * Runs one vendored spec file on `store`. The specs were written for Jest's CommonJS mode,
 * where `jest` is a global: in ESM mode it is not, so it is given one here, before the spec
 * is imported (its `jest.setTimeout` runs at import).
 */
export async function runVendored(store: SuiteStore, spec: () => Promise<unknown>): Promise<void> {
  setSuiteStore(store);
  (globalThis as Record<string, unknown>).jest = jest;
  await spec();
}
