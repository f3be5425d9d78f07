/**
 * One app of the overload part, in a process of its own (started by index.ts through
 * ../http/apps.ts):
 *
 *   node bench/dist/overload/app.js <platform> <variant> <port> - <work>
 *
 * `GET /work/critical` and `GET /work/sheddable` do the same work (work.ts: `cpu` or `pool`);
 * only the path tells the priority. `GET /hi` answers 'hi' at once (the CPU figure at a fixed
 * load). Prints `ready` once listening. Over IPC, `samples` is answered with what the variant's
 * protection showed since the last ask ({@link Sample}, every {@link SAMPLE_MS} ms): the
 * adaptive limit, or whether `@fastify/under-pressure` is refusing.
 *
 * Variants: `none`; `under-pressure` (Fastify only; by event-loop delay); `nrl-static` (a
 * `@ConcurrencyLimit` on the memory store, one key for the whole process); `nrl-adaptive`
 * (`overload: true` with `@Priority`); and for the CPU figure `nrl-off` (the module, no
 * policy) and `nrl-overload` (the same with `overload: true`). BENCH_NRL_ENTRY loads another
 * build (a baseline's).
 */
import 'reflect-metadata';
import { pathToFileURL } from 'node:url';
import {
  applyDecorators,
  Controller,
  Get,
  Module,
  type DynamicModule,
  type ModuleMetadata,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import underPressure from '@fastify/under-pressure';
import type { OverloadOptions } from 'nest-rate-limit';
import type { NrlPackage } from '../baseline.js';
import { currentOf } from '../twins.js';
import { CPU_MS, Pool, POOL_HOLD_MS, POOL_SIZE, spin, STATIC_LIMITS, type Work } from './work.js';
import type { Sample } from './figures.js';

const entry = process.env.BENCH_NRL_ENTRY;
const nrl = (await (entry
  ? import(pathToFileURL(entry).href)
  : import('nest-rate-limit'))) as NrlPackage;

/** How often the protection's state is sampled, in ms. */
export const SAMPLE_MS = 50;

/**
 * `@fastify/under-pressure`'s settings: 503 while the event loop's mean delay over the last
 * 100 ms sample passes 20 ms (its default sample is 1 s, far too slow to follow a burst).
 */
export const UNDER_PRESSURE = { maxEventLoopDelay: 20, sampleInterval: 100, retryAfter: 1 };

type Decorator = ClassDecorator & MethodDecorator;

/**
 * Throws on a build without the overload API (a baseline's), which would otherwise ignore
 * `overload: true` unnoticed.
 */
function assertOverloadApi(): void {
  if (typeof (nrl as Partial<NrlPackage>).Priority !== 'function')
    throw new Error('this build of nest-rate-limit has no @Priority: the overload API is missing');
}

function priority(p: 'critical' | 'sheddable'): Decorator {
  assertOverloadApi();
  return nrl.Priority(p);
}

function workController(
  work: Work,
  onClass: Decorator[],
  critical: Decorator[],
  sheddable: Decorator[],
): new () => unknown {
  const pool = new Pool(POOL_SIZE);
  const serve =
    work === 'cpu' ? () => (spin(CPU_MS), 'ok') : () => pool.use(POOL_HOLD_MS).then(() => 'ok');

  @Controller()
  @applyDecorators(...onClass)
  class WorkController {
    @Get('work/critical')
    @applyDecorators(...critical)
    critical() {
      return serve();
    }

    @Get('work/sheddable')
    @applyDecorators(...sheddable)
    sheddable() {
      return serve();
    }

    @Get('hi')
    hi() {
      return 'hi';
    }
  }
  return WorkController;
}

/**
 * `nrl-adaptive`'s overload options: `true` (the defaults), or the JSON object in
 * BENCH_OVERLOAD_OPTIONS (e.g. `{"maxTurnMs":1}`), to measure a setting against them.
 */
function overloadOptions(): true | OverloadOptions {
  const json = process.env.BENCH_OVERLOAD_OPTIONS;
  return json ? (JSON.parse(json) as OverloadOptions) : true;
}

function variantModule(variant: string, work: Work): ModuleMetadata {
  const forRoot = (options: Parameters<typeof nrl.RateLimitModule.forRoot>[0]): DynamicModule =>
    nrl.RateLimitModule.forRoot(options);
  switch (currentOf(variant)) {
    case 'none':
    case 'under-pressure':
      return { controllers: [workController(work, [], [], [])] };
    case 'nrl-static': {
      // One key for every request: the limit of the process, as the adaptive one is.
      const limit = nrl.ConcurrencyLimit(STATIC_LIMITS[work], { key: () => 'process' });
      return {
        imports: [forRoot({ store: 'memory' })],
        controllers: [workController(work, [limit], [], [])],
      };
    }
    case 'nrl-adaptive':
      return {
        imports: [forRoot({ store: 'memory', overload: overloadOptions(), metrics: true })],
        controllers: [workController(work, [], [priority('critical')], [priority('sheddable')])],
      };
    case 'nrl-off':
      return {
        imports: [forRoot({ store: 'memory' })],
        controllers: [workController(work, [], [], [])],
      };
    case 'nrl-overload':
      assertOverloadApi();
      return {
        imports: [forRoot({ store: 'memory', overload: true })],
        controllers: [workController(work, [], [], [])],
      };
    default:
      throw new Error(`unknown overload variant ${variant}`);
  }
}

/**
 * The adaptive limit and the calls in flight (all priorities), from the module's metrics
 * (`rate_limit_overload_limit`, `rate_limit_overload_in_flight`) in prom-client's global
 * registry: one pool, the process's.
 */
async function overloadGauges(): Promise<Pick<Sample, 'limit' | 'inFlight'>> {
  const { register } = (await import('prom-client')).default;
  const values = async (name: string) =>
    ((await register.getSingleMetric(name)?.get())?.values ?? []).map((v) => v.value);
  const [limit] = await values('rate_limit_overload_limit');
  const inFlight = (await values('rate_limit_overload_in_flight')).reduce((a, b) => a + b, 0);
  return { limit, inFlight };
}

async function main(): Promise<void> {
  if (process.send) {
    process.on('disconnect', () => process.exit(0));
    if (!process.connected) process.exit(0);
  }
  const [platform, variant, port, , work] = process.argv.slice(2) as [
    string,
    string,
    string,
    string,
    Work,
  ];
  if ((platform !== 'express' && platform !== 'fastify') || !port || !work) {
    throw new Error('usage: app.js <express|fastify> <variant> <port> - <cpu|pool>');
  }
  if (variant === 'under-pressure' && platform !== 'fastify')
    throw new Error('under-pressure is a Fastify plugin');

  @Module(variantModule(variant, work))
  class OverloadModule {}

  const options = { logger: false, abortOnError: false } as const;
  // Nothing to sample for `none` and the static limit (a constant).
  let sample: (() => Promise<Omit<Sample, 'atMs'>>) | undefined;
  if (platform === 'express') {
    const app = await NestFactory.create(OverloadModule, options);
    await app.listen(Number(port), '127.0.0.1');
  } else {
    const app = await NestFactory.create<NestFastifyApplication>(
      OverloadModule,
      new FastifyAdapter(),
      options,
    );
    if (variant === 'under-pressure') {
      await app.register(underPressure, UNDER_PRESSURE);
      const fastify = app.getHttpAdapter().getInstance();
      sample = () => Promise.resolve({ underPressure: fastify.isUnderPressure() ? 1 : 0 });
    }
    await app.listen(Number(port), '127.0.0.1');
  }
  if (currentOf(variant) === 'nrl-adaptive') sample = overloadGauges;

  const samples: Sample[] = [];
  if (sample) {
    const take = sample;
    setInterval(() => {
      const atMs = Date.now();
      void take().then((s) => samples.push({ atMs, ...s }));
    }, SAMPLE_MS).unref();
  }
  process.on('message', (message) => {
    if (message === 'samples') process.send!(samples.splice(0));
  });
  console.log('ready');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
