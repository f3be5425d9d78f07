/** Which store the vendored suite runs on in this test file (set by `runVendored`). */
export type SuiteStore = 'memory' | 'redis' | 'cluster';

const KEY = Symbol.for('nest-rate-limit.throttler-suite.store');

/** The store of this test file's run (each Jest test file has its own globals). */
export function suiteStore(): SuiteStore {
  return ((globalThis as Record<symbol, unknown>)[KEY] as SuiteStore | undefined) ?? 'memory';
}

export function setSuiteStore(store: SuiteStore): void {
  (globalThis as Record<symbol, unknown>)[KEY] = store;
}
