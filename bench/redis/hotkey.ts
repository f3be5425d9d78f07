/**
 * Part 5: one abusive identity at full speed, mostly denied: decisions per second and how
 * many Redis calls each denied request costs.
 */
import type { Redis } from 'ioredis';
import { fmt, table } from '../support.js';
import { BUSY, type Contender } from './contenders.js';
import { commandStats } from './store.js';

export interface HotKeyRow {
  contender: string;
  perSecond: number;
  denied: number;
  callsPerDenied: number;
}

export async function runHotKeyBench(options: {
  admin: Redis;
  contenders: Contender[];
  decisions: number;
  concurrency: number;
  log: (line: string) => void;
}): Promise<HotKeyRow[]> {
  const rows: HotKeyRow[] = [];
  for (const c of options.contenders) {
    await options.admin.flushall();
    await options.admin.config('RESETSTAT');
    let next = 0;
    let denied = 0;
    const started = process.hrtime.bigint();
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        while (next++ < options.decisions) if (!(await c.decide('ip:198.51.100.66'))) denied++;
      }),
    );
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const { calls } = await commandStats(options.admin, c.command);
    const admitted = options.decisions - denied;
    rows.push({
      contender: c.name,
      perSecond: options.decisions / seconds,
      denied,
      // Every admitted request needs its call; what is left was spent on denials.
      callsPerDenied: denied > 0 ? (calls - admitted) / denied : 0,
    });
  }
  options.log(
    `\nPart 5. Hot key: one identity, ${options.decisions} decisions at c=${options.concurrency}, budget ${BUSY.limit} per ${BUSY.periodS} s`,
  );
  options.log(
    table(
      ['contender', 'decisions/s', 'denied', 'Redis calls per denied'],
      rows.map((r) => [r.contender, Math.round(r.perSecond), r.denied, fmt(r.callsPerDenied)]),
    ),
  );
  return rows;
}
