/** Part 4: Redis memory per identity, after each contender decided once for many identities. */
import type { Redis } from 'ioredis';
import { fmt, table } from '../support.js';
import { currentOf } from '../twins.js';
import type { Contender } from './contenders.js';

export interface MemoryRow {
  contender: string;
  keysPerIdentity: number;
  /** Mean `MEMORY USAGE` of its keys, per identity, in bytes. */
  memoryUsage: number;
  /** Growth of `used_memory` per identity, in bytes (also counts the expiry entries). */
  usedMemory: number;
}

async function usedMemory(admin: Redis): Promise<number> {
  const info = await admin.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)![1]);
}

export async function runMemoryBench(options: {
  admin: Redis;
  contenders: Contender[];
  identities: number;
  log: (line: string) => void;
}): Promise<MemoryRow[]> {
  const { admin, identities } = options;
  const rows: MemoryRow[] = [];
  for (const c of options.contenders) {
    // 2 × one; a 7/s debt expires within the run; the floor keeps nothing (nor their twins).
    if (['nrl-stacked', 'nrl-gcra-7ps', 'floor'].includes(currentOf(c.name))) continue;
    // A private Redis: each contender starts from an empty one.
    await admin.flushall();
    const before = await usedMemory(admin);
    for (let i = 0; i < identities; i += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, k) =>
          c.decide(`ip:203.0.${(i + k) >> 8}.${(i + k) & 255}`),
        ),
      );
    }
    const after = await usedMemory(admin);
    let keys = 0;
    let bytes = 0;
    let cursor = '0';
    do {
      const [next, batch] = await admin.scan(cursor, 'COUNT', 1000);
      cursor = next;
      for (const key of batch) {
        keys++;
        bytes += (await admin.memory('USAGE', key, 'SAMPLES', 0)) ?? 0;
      }
    } while (cursor !== '0');
    rows.push({
      contender: c.name,
      keysPerIdentity: keys / identities,
      memoryUsage: bytes / identities,
      usedMemory: (after - before) / identities,
    });
  }
  await admin.flushall();
  options.log(`\nPart 4. Memory per identity (${identities} identities, one decision each)`);
  options.log(
    table(
      ['contender', 'keys/identity', 'MEMORY USAGE B', 'used_memory B'],
      rows.map((r) => [
        r.contender,
        fmt(r.keysPerIdentity),
        Math.round(r.memoryUsage),
        Math.round(r.usedMemory),
      ]),
    ),
  );
  return rows;
}
