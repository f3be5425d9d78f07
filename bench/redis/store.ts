/**
 * Parts 2 and 3: decisions per second at the store level, and what each decision costs
 * Redis (`INFO commandstats`), for every contender on one Redis, interleaved over rounds.
 */
import type { Redis } from 'ioredis';
import type { Baseline } from '../baseline.js';
import { fmt, median, table } from '../support.js';
import { BUSY, contenders, newClient, type Contender } from './contenders.js';

export interface StoreRow {
  contender: string;
  what: string;
  command: string;
  /** Median decisions per second, by concurrency. */
  perSecond: Record<number, number>;
  /** Median µs Redis spent per call (usec_per_call), at concurrency 16. */
  usecPerCall: number;
  /**
   * Median µs of this process's CPU per decision at concurrency 16: the limiter's own Node
   * work and its Redis client's, side by side on the same kind of client.
   */
  nodeUsPerDecision: number;
  /** Script calls per decision (1 means one round trip). */
  callsPerDecision: number;
  denied: number;
}

export interface StoreOptions {
  redisUrl: string;
  rounds: number;
  concurrencies: number[];
  /** Decisions per run, by concurrency. */
  decisions: (concurrency: number) => number;
  /** Distinct identities the decisions are spread over. */
  identities: number;
  /** BENCH_BASELINE's build: each of ours gets its `@base` twin, in the same rounds. */
  base?: Baseline;
  log: (line: string) => void;
}

export async function commandStats(admin: Redis, command: string) {
  const info = await admin.info('commandstats');
  const match = new RegExp(`cmdstat_${command}:calls=(\\d+),usec=(\\d+)`).exec(info);
  return { calls: Number(match?.[1] ?? 0), usec: Number(match?.[2] ?? 0) };
}

/** `total` decisions by `concurrency` workers; resolves to [decisions/s, denied]. */
async function drive(c: Contender, concurrency: number, total: number, identities: number) {
  let next = 0;
  let denied = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++;
        if (!(await c.decide(`ip:10.${(i % identities) >> 16}.${(i >> 8) & 255}.${i & 255}`)))
          denied++;
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return [total / seconds, denied] as const;
}

export async function runStoreBench(options: StoreOptions): Promise<StoreRow[]> {
  const client = newClient(options.redisUrl);
  const admin = newClient(options.redisUrl);
  try {
    const list = contenders(client, BUSY, options.base);
    const perSecond = new Map<string, Map<number, number[]>>();
    const usec = new Map<string, number[]>();
    const calls = new Map<string, number[]>();
    const nodeUs = new Map<string, number[]>();
    const denied = new Map<string, number>();
    // Warm up: scripts loaded, connections and JIT warm.
    for (const c of list) await drive(c, 16, 2000, options.identities);
    for (let round = 0; round < options.rounds; round++) {
      for (const concurrency of options.concurrencies) {
        // Rotate the order each round so no contender always runs first.
        const order = list.map((_, i) => list[(i + round) % list.length]!);
        for (const c of order) {
          const total = options.decisions(concurrency);
          const measured = concurrency === 16;
          if (measured) await admin.config('RESETSTAT');
          const cpu = process.cpuUsage();
          const [rate, refused] = await drive(c, concurrency, total, options.identities);
          if (measured) {
            const spent = process.cpuUsage(cpu);
            push(nodeUs, c.name, (spent.user + spent.system) / total);
            const stats = await commandStats(admin, c.command);
            push(usec, c.name, stats.usec / stats.calls);
            push(calls, c.name, stats.calls / total);
          }
          const byConcurrency = perSecond.get(c.name) ?? new Map<number, number[]>();
          perSecond.set(c.name, byConcurrency);
          push(byConcurrency, concurrency, rate);
          denied.set(c.name, (denied.get(c.name) ?? 0) + refused);
        }
      }
    }
    const rows = list.map((c) => ({
      contender: c.name,
      what: c.what,
      command: c.command,
      perSecond: Object.fromEntries(
        options.concurrencies.map((n) => [n, median(perSecond.get(c.name)!.get(n)!)]),
      ),
      usecPerCall: median(usec.get(c.name)!),
      nodeUsPerDecision: median(nodeUs.get(c.name)!),
      callsPerDecision: median(calls.get(c.name)!),
      denied: denied.get(c.name)!,
    }));
    printStore(rows, options);
    return rows;
  } finally {
    client.disconnect();
    admin.disconnect();
  }
}

function push<K>(map: Map<K, number[]>, key: K, value: number) {
  const list = map.get(key) ?? [];
  list.push(value);
  map.set(key, list);
}

function printStore(rows: StoreRow[], options: StoreOptions) {
  const rlf = rows.find((r) => r.contender === 'rlf-redis')!;
  const gcra = rows.find((r) => r.contender === 'nrl-gcra')!;
  const floor = rows.find((r) => r.contender === 'floor')!;
  options.log(
    `\nPart 2. Store level: decisions/s (median of ${options.rounds} interleaved rounds), ${options.identities} identities; ×floor: the share of an empty script's rate reached`,
  );
  options.log(
    table(
      [
        'contender',
        ...options.concurrencies.flatMap((n) => [`c=${n}/s`, '×rlf', '×floor']),
        'denied',
      ],
      rows.map((r) => [
        r.contender,
        ...options.concurrencies.flatMap((n) => [
          Math.round(r.perSecond[n]!),
          fmt(r.perSecond[n]! / rlf.perSecond[n]!),
          fmt(r.perSecond[n]! / floor.perSecond[n]!),
        ]),
        r.denied,
      ]),
    ),
  );
  options.log(
    `\nPart 3. Cost per decision at c=16, median of ${options.rounds}: Redis (INFO commandstats) and this Node process (CPU, the client included)`,
  );
  options.log(
    table(
      [
        'contender',
        'command',
        'usec_per_call',
        '×rlf',
        '×nrl-gcra',
        '×floor',
        'calls/decision',
        'Node µs/decision',
        '×rlf',
        'what',
      ],
      rows.map((r) => [
        r.contender,
        r.command,
        fmt(r.usecPerCall),
        fmt(r.usecPerCall / rlf.usecPerCall),
        fmt(r.usecPerCall / gcra.usecPerCall),
        fmt(r.usecPerCall / floor.usecPerCall),
        fmt(r.callsPerDecision),
        fmt(r.nodeUsPerDecision),
        fmt(r.nodeUsPerDecision / rlf.nodeUsPerDecision),
        r.what,
      ]),
    ),
  );
}
