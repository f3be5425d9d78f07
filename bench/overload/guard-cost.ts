/**
 * What `overload` adds to the CPU of one HTTP call below capacity, in process (no sockets, no
 * load generator, so a difference of a microsecond is resolved on a busy machine):
 *
 *   npm run build && npx tsc -p bench/tsconfig.json && node bench/dist/overload/guard-cost.js
 *
 * One Nest application context per variant, the module on the memory store, one controller
 * whose route has `@RateLimit('1000000/m')`; `off` without the `overload` option, `on` with
 * `overload: true`. A call is what Nest's HTTP router does around a handler: the module's
 * global guard (`canActivate`), then the route's interceptors as Nest resolves them from what
 * bootstrap left on the class (`InterceptorsContextCreator`: a class Nest made no instance of
 * is left out, as in an app), through Nest's `InterceptorsConsumer` (none: the handler is
 * called directly), then the
 * response's 'finish' and 'close' (where HTTP gives slots back). CPU per call from
 * `process.cpuUsage`, `GUARD_COST_CALLS` calls (default 20,000) per variant per round,
 * `GUARD_COST_ROUNDS` (default 15) rounds interleaved; medians, and on minus off paired per
 * round. BENCH_NRL_ENTRY loads another build (a baseline's).
 */
import 'reflect-metadata';
import { EventEmitter } from 'node:events';
import { pathToFileURL } from 'node:url';
import { Controller, Get, Module, type NestInterceptor } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import type { NestContainer } from '@nestjs/core/injector/container.js';
import { InterceptorsConsumer } from '@nestjs/core/interceptors/interceptors-consumer.js';
import { InterceptorsContextCreator } from '@nestjs/core/interceptors/interceptors-context-creator.js';
import { isObservable, lastValueFrom } from 'rxjs';
import type { NrlPackage } from '../baseline.js';
import { median } from '../support.js';

const entry = process.env.BENCH_NRL_ENTRY;
const nrl = (await (entry
  ? import(pathToFileURL(entry).href)
  : import('nest-rate-limit'))) as NrlPackage;

const CALLS = Number(process.env.GUARD_COST_CALLS ?? 20_000);
const ROUNDS = Number(process.env.GUARD_COST_ROUNDS ?? 15);

interface Variant {
  name: 'off' | 'on';
  /** How many interceptors Nest runs around the handler. */
  interceptors: number;
  call(): Promise<void>;
  close(): Promise<void>;
}

/** A Node response as far as the module reads it: headers, 'finish' and 'close'. */
class Response extends EventEmitter {
  statusCode = 200;
  closed = false;
  writableFinished = false;
  setHeader(): void {}
  /** What Node does once the response is written. */
  end(): void {
    this.writableFinished = true;
    this.emit('finish');
    this.closed = true;
    this.emit('close');
  }
}

async function variant(name: Variant['name']): Promise<Variant> {
  @Controller()
  class ItemsController {
    @Get('items')
    @nrl.RateLimit('1000000/m')
    items() {
      return 'ok';
    }
  }
  @Module({
    imports: [
      nrl.RateLimitModule.forRoot({
        store: 'memory',
        ...(name === 'on' && { overload: true }),
      }),
    ],
    controllers: [ItemsController],
  })
  class BenchModule {}
  const app = await NestFactory.createApplicationContext(BenchModule, { logger: false });
  await app.init();
  const guard = app.get(nrl.RateLimitGuard, { strict: false });
  const controller = app.get(ItemsController);
  const handler = ItemsController.prototype.items;
  const container = (app as unknown as { container: NestContainer }).container;
  const [moduleKey] = [...container.getModules()].find(([, m]) => m.metatype === BenchModule)!;
  const interceptors: NestInterceptor[] = new InterceptorsContextCreator(container).create(
    controller,
    handler,
    moduleKey,
  );
  const consumer = new InterceptorsConsumer();
  const run = () => Promise.resolve(controller.items());
  return {
    name,
    interceptors: interceptors.length,
    async call() {
      const request = { ip: '192.0.2.7', headers: {}, socket: { remoteAddress: '192.0.2.7' } };
      const response = new Response();
      const ctx = new ExecutionContextHost([request, response], ItemsController, handler);
      ctx.setType('http');
      if (!(await guard.canActivate(ctx))) throw new Error('refused');
      const args = [request, response, undefined];
      const result: unknown = await consumer.intercept(
        interceptors,
        args,
        controller,
        handler,
        run,
        'http',
      );
      if (isObservable(result)) await lastValueFrom(result);
      response.end();
    },
    close: () => app.close(),
  };
}

/** CPU µs per call of `v` over `n` calls. */
async function measure(v: Variant, n: number): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) await v.call();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

const variants = [await variant('off'), await variant('on')];
try {
  for (const v of variants) await measure(v, CALLS);
  const us: Record<string, number[]> = { off: [], on: [] };
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate which goes first: whatever the machine does meanwhile falls on both.
    const order = round % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) us[v.name]!.push(await measure(v, CALLS));
  }
  console.log(`interceptors per call with overload on: ${variants[1]!.interceptors}`);
  const diff = us.on!.map((on, r) => on - us.off![r]!);
  const f = (x: number) => x.toFixed(2);
  console.log(
    `guard + interceptors per HTTP call, CPU µs, median of ${ROUNDS} rounds of ${CALLS}: ` +
      `off ${f(median(us.off!))}, on ${f(median(us.on!))}, on − off ${f(median(diff))} ` +
      `(rounds: ${diff.map(f).join(' ')})`,
  );
} finally {
  for (const v of variants) await v.close();
}
