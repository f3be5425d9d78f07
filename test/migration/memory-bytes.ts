/**
 * Heap bytes per key of the in-memory storages, measured: N budget keys, each hit once, as
 * the throttler's guard makes them (a sha256 of class, handler, throttler and tracker).
 *
 *   node --expose-gc --import tsx/esm test/migration/memory-bytes.ts <real|ours|store> [N]
 *
 * `real` is @nestjs/throttler 6.7.1's ThrottlerStorageService, `ours` the drop-in's, `store`
 * the module's MemoryStore through a RateLimiter (one `ip:` identity per key, the module's
 * default policy); each with its default options. Prints `result {"which", "keys": keys
 * held, "bytes": heap growth, "bytesPerKey"}`.
 */
import 'reflect-metadata';
import { createHash } from 'node:crypto';

const gc = (globalThis as { gc?: () => void }).gc;

function heap(): number {
  for (let i = 0; i < 4; i++) gc!();
  return process.memoryUsage().heapUsed;
}

function keyOf(i: number): string {
  return createHash('sha256')
    .update(`Cats-list-default-10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`)
    .digest('hex');
}

async function main(): Promise<void> {
  const [which = 'ours', count = '200000'] = process.argv.slice(2);
  const n = Number(count);
  if (!gc) throw new Error('run with --expose-gc');
  let hit: (i: number) => Promise<unknown>;
  let size: () => number;
  let keep: unknown;
  if (which === 'store') {
    const { MemoryStore } = await import('../../lib/core/stores/memory/memory-store.js');
    const { RateLimiter, definePolicy } = await import('../../lib/core/limiter.js');
    const store = new MemoryStore({ sweepIntervalMs: 0 });
    const limiter = new RateLimiter({ store });
    const policy = definePolicy({ name: 'default', rate: '1000/h' }, 'memory-bytes');
    hit = (i) =>
      limiter.consumeEach([
        { identity: `ip:10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, policy, scope: 'global' },
      ]);
    size = () => store.size;
    keep = limiter;
  } else {
    const api =
      which === 'real'
        ? ((await import('@nestjs/throttler')) as unknown as typeof import('../../lib/throttler/index.js'))
        : await import('../../lib/throttler/index.js');
    const storage =
      which === 'real'
        ? new api.ThrottlerStorageService()
        : new api.ThrottlerStorageService({ sweepIntervalMs: 0 });
    hit = (i) => storage.increment(keyOf(i), 3_600_000, 1000, 3_600_000, 'default');
    size = () =>
      which === 'real'
        ? (storage as unknown as { storage: Map<string, unknown> }).storage.size
        : storage.store.size;
    keep = storage;
  }
  // Warm up the code paths (and any lazily made structure) before the baseline.
  await hit(-1);
  const before = heap();
  for (let i = 0; i < n; i++) await hit(i);
  const after = heap();
  const keys = size();
  const bytes = after - before;
  console.log(
    `result ${JSON.stringify({ which, keys, bytes, bytesPerKey: Math.round(bytes / keys) })}`,
  );
  void keep;
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
