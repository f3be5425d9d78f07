/**
 * `npm run memory` (node --expose-gc): memory bounds of MemoryStore and of the guard.
 *
 *   1. 1,000,000 distinct identities, one consume each, on an injected clock: size, heap, RSS.
 *   2. The clock moves past every TTL; sweep() until it returns 0: the store must be empty.
 *   3. maxKeys 200,000 under 1,000,000 identities: the size never exceeds 200,000.
 *   4. A Nest app (Express, memory store, one @RateLimit route) answers ~2000 requests; a
 *      FinalizationRegistry on every request object shows they are all collected.
 *
 *   MEMORY_IDENTITIES=1000000   identities in steps 1-3
 *   MEMORY_REQUESTS=2000        requests in step 4
 *
 * Exits 1 when a bound does not hold.
 */
import 'reflect-metadata';
import { setImmediate as immediate } from 'node:timers/promises';
import { Controller, Get, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { keys, MemoryStore, RateLimit, RateLimiter, RateLimitModule } from 'nest-rate-limit';

const N = Number(process.env.MEMORY_IDENTITIES ?? 1_000_000);
const REQUESTS = Number(process.env.MEMORY_REQUESTS ?? 2000);
const CAP = Math.min(200_000, Math.floor(N / 5));
const RATE = '10/m';
const MB = 1024 * 1024;

const gc = globalThis.gc;
if (!gc) {
  console.error('run with node --expose-gc');
  process.exit(2);
}

/** A few full collections, with turns of the event loop between them for finalizers. */
async function collect(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    gc!();
    await immediate();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

interface Row {
  step: string;
  size: number | string;
  heapMB: number;
  rssMB: number;
  note: string;
}
const rows: Row[] = [];
const failures: string[] = [];

async function measure(step: string, size: number | string, note = ''): Promise<Row> {
  await collect();
  const { heapUsed, rss } = process.memoryUsage();
  const row = { step, size, heapMB: heapUsed / MB, rssMB: rss / MB, note };
  rows.push(row);
  console.log(
    `  ${step}: size ${size}, heap ${row.heapMB.toFixed(1)} MB, rss ${row.rssMB.toFixed(1)} MB ${note}`,
  );
  return row;
}

function check(ok: boolean, what: string): void {
  if (!ok) failures.push(what);
}

/** Steps 1-3. The limiter builds the same keys a Nest app would. */
async function storeBounds(): Promise<void> {
  let now = Date.UTC(2026, 0, 1);
  const clock = () => now;
  const base = await measure('baseline', 0);

  // 1 + 2: default maxKeys (1,000,000), no timer: sweeps only when called.
  let store: MemoryStore | undefined = new MemoryStore({ clock, sweepIntervalMs: 0 });
  const limiter = new RateLimiter({ store, timeoutMs: Infinity, circuitBreaker: false });
  let t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const decision = await limiter.consume(`user:${i}`, { rate: RATE });
    if (!decision.allowed) failures.push(`user:${i} refused on its first request`);
    if (i % 1000 === 999) now += 1; // 1 ms per 1000 requests: ~1 s of clock for 1M
  }
  const fillSeconds = (performance.now() - t0) / 1000;
  const full = await measure(
    `${N} identities`,
    store.size,
    `(${fillSeconds.toFixed(1)} s to fill)`,
  );
  console.log(
    `    ~${(((full.heapMB - base.heapMB) * MB) / store.size).toFixed(0)} heap bytes per key`,
  );
  check(store.size === N, `size after ${N} identities is ${store.size}, expected ${N}`);

  now += 61_000; // past every TTL (a 10/m token bucket spent by 1 expires within 6 s)
  t0 = performance.now();
  let sweeps = 0;
  let dropped = 0;
  for (let d = store.sweep(); d > 0; d = store.sweep()) {
    sweeps++;
    dropped += d;
  }
  const sweepMs = performance.now() - t0;
  const swept = await measure(
    'after sweep',
    store.size,
    `(${sweeps} sweeps of 10,000 dropped ${dropped} in ${sweepMs.toFixed(0)} ms)`,
  );
  check(store.size === 0, `size after sweeping is ${store.size}, expected 0`);
  check(dropped === N, `sweeps dropped ${dropped}, expected ${N}`);
  await store.close();
  store = undefined;
  await measure('store dropped', '-');

  // 3: maxKeys bounds the size while 1,000,000 identities arrive.
  const capped = new MemoryStore({ clock, sweepIntervalMs: 0, maxKeys: CAP });
  const cappedLimiter = new RateLimiter({
    store: capped,
    timeoutMs: Infinity,
    circuitBreaker: false,
  });
  let maxSeen = 0;
  t0 = performance.now();
  for (let i = 0; i < N; i++) {
    await cappedLimiter.consume(`user:${i}`, { rate: RATE });
    if (capped.size > maxSeen) maxSeen = capped.size;
    if (i % 1000 === 999) now += 1;
  }
  await measure(
    `maxKeys ${CAP}`,
    capped.size,
    `(max size seen ${maxSeen}; ${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
  check(maxSeen <= CAP, `maxKeys ${CAP}: size reached ${maxSeen}`);
  check(capped.size === CAP, `maxKeys ${CAP}: final size ${capped.size}`);
  await capped.close();
  void swept;
}

/** Step 4: request objects seen by the guard are collected once answered. */
async function guardRetention(): Promise<void> {
  let created = 0;
  let finalized = 0;
  const registry = new FinalizationRegistry<undefined>(() => finalized++);

  @Controller()
  class LimitedController {
    @Get('limited')
    @RateLimit('10/m', { key: keys.header('x-user') })
    limited() {
      return { ok: true };
    }
  }
  @Module({
    imports: [RateLimitModule.forRoot({ store: 'memory' })],
    controllers: [LimitedController],
  })
  class AppModule {}

  const app: INestApplication = await NestFactory.create(AppModule, { logger: ['error'] });
  app.use((req: object, _res: unknown, next: () => void) => {
    created++;
    registry.register(req, undefined);
    next();
  });
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');

  const statuses = new Map<number, number>();
  let next = 0;
  // 100 identities, 20 requests each under 10/m: half admitted, half refused (both paths).
  const worker = async () => {
    while (next < REQUESTS) {
      const i = next++;
      let status = 0;
      try {
        const response = await fetch(`${url}/limited`, {
          headers: { 'x-user': `u${i % 100}` },
          signal: AbortSignal.timeout(5000),
        });
        await response.arrayBuffer();
        status = response.status;
      } catch {
        status = 0;
      }
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: 10 }, worker));
  await collect(4);
  const openFinal = finalized;
  const pct = (n: number) => ((100 * n) / created).toFixed(2);
  const byStatus = [...statuses].map(([s, n]) => `${s}: ${n}`).join(', ');
  console.log(
    `  guard: ${created} requests (${byStatus}); finalized ${openFinal} (${pct(openFinal)}%) ` +
      `with keep-alive connections open`,
  );
  // Idle keep-alive sockets may hold Node's last parser state; close them to see the rest go.
  const server = app.getHttpServer() as { closeIdleConnections?: () => void };
  server.closeIdleConnections?.();
  await collect(4);
  console.log(
    `  guard: finalized ${finalized} (${pct(finalized)}%) after closing idle connections`,
  );
  await app.close();
  await collect(2);
  console.log(`  guard: finalized ${finalized} (${pct(finalized)}%) after app.close()`);
  rows.push({
    step: `guard, ${created} requests`,
    size: `${openFinal}/${created} collected`,
    heapMB: process.memoryUsage().heapUsed / MB,
    rssMB: process.memoryUsage().rss / MB,
    note: `${pct(openFinal)}% with connections open, ${pct(finalized)}% after close`,
  });
  check(created === REQUESTS, `the middleware saw ${created} requests, expected ${REQUESTS}`);
  check((statuses.get(200) ?? 0) + (statuses.get(429) ?? 0) === REQUESTS, `statuses ${byStatus}`);
  check(openFinal >= 0.99 * created, `only ${openFinal} of ${created} requests were collected`);
}

function table(): string {
  const head = ['step', 'store.size', 'heapUsed MB', 'RSS MB', ''];
  const body = rows.map((r) => [
    r.step,
    String(r.size),
    r.heapMB.toFixed(1),
    r.rssMB.toFixed(1),
    r.note,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 || i === 4 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

console.log(`MemoryStore, ${N} identities at ${RATE} (node ${process.version})`);
await storeBounds();
console.log(`Guard retention, ${REQUESTS} requests`);
await guardRetention();
console.log(`\n${table()}\n`);
if (failures.length) {
  console.log(`memory FAILED:\n- ${failures.join('\n- ')}`);
  process.exit(1);
}
console.log('memory passed: store bounded, swept to 0, request objects collected');
process.exit(0);
