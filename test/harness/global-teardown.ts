/**
 * Jest global teardown: stops what global setup started. Runs in the same process as global
 * setup, so it finds the handles on globalThis (and must not import local modules either, see
 * global-setup.ts; type-only imports are erased and therefore fine).
 */
import { rmSync } from 'node:fs';
import type { HarnessState } from './global-setup.js';

export default async function globalTeardown(): Promise<void> {
  const state = (globalThis as { __nrlRedisHarness?: HarnessState }).__nrlRedisHarness;
  if (!state) return;
  await Promise.all(state.processes.map((server) => server.stop('SIGTERM', 5000)));
  await state.container?.stop();
  if (state.dir) rmSync(state.dir, { recursive: true, force: true });
}
