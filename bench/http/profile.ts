/**
 * Where an HTTP variant's CPU goes at the fixed load (issue 37: say what each microsecond
 * above the floor is). Each variant's app (app.ts, Fastify unless BENCH_PROFILE_PLATFORM
 * says otherwise) is loaded at BENCH_RATE req/s (default 5000) for BENCH_PROFILE_S seconds
 * (default 10) while V8's sampling profiler runs in it (100 µs interval, started after the
 * warm-up: the boot is not in it); then the samples are summed by where their function lives
 * (this package, ioredis, Fastify, Nest, Node's own, the garbage collector) and printed in µs
 * per request, beside `none`'s. The profiles are written to
 * bench/results/profile-<variant>.cpuprofile (open them in Chrome's DevTools).
 *
 *   node bench/dist/http/profile.js [variant,...]   (default none,floor-redis,nrl-tb,rlf-redis)
 *
 * The profiler costs the app CPU of its own, and a busy machine slows every variant alike:
 * read the shares and the differences between variants, not the totals.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DRIVER_CORE, pin, pinningLine } from '../pin.js';
import { startRedis, table } from '../support.js';
import { startApp, type App } from './apps.js';
import { pacedLoad } from './paced.js';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const PACKAGE_DIST = fileURLToPath(new URL('../../../dist/', import.meta.url));

/** Where a function lives, for the summary. */
function placeOf({ functionName, url }: CallFrame): string {
  if (functionName === '(garbage collector)') return 'garbage collector';
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(program)' || functionName === '(root)') return 'V8 (program)';
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  if (path.startsWith(PACKAGE_DIST)) return 'nest-rate-limit';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)?.[1];
  if (pkg?.startsWith('@nestjs/') || pkg === 'rxjs' || pkg === 'reflect-metadata') return 'Nest';
  if (pkg && ['fastify', 'find-my-way', 'light-my-request', 'avvio', 'pino'].includes(pkg))
    return 'Fastify';
  if (pkg && /^(express|body-parser|router|send|finalhandler)$/.test(pkg)) return 'Express';
  if (pkg) return pkg;
  if (path.startsWith('node:') || path === '') return 'Node (JS and native)';
  return 'other';
}

/** µs per request by place, and by function of this package; idle left out. */
function summarise(profile: Profile, requests: number) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const places = new Map<string, number>();
  const ours = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)!;
    const us = profile.timeDeltas[i] ?? 0;
    const place = placeOf(frame);
    if (place === 'idle') return;
    places.set(place, (places.get(place) ?? 0) + us / requests);
    if (place === 'nest-rate-limit') {
      const where = `${frame.functionName || '(anonymous)'} ${frame.url.slice(frame.url.indexOf('/dist/') + 6)}:${frame.lineNumber + 1}`;
      ours.set(where, (ours.get(where) ?? 0) + us / requests);
    }
  });
  return { places, ours };
}

async function profiled(app: App, rate: number, seconds: number) {
  await pacedLoad(app.url, rate, 2, 64);
  // The app sends its profile back, or why it could not; it may also die meanwhile.
  const profile = new Promise<Profile>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no profile within 60 s')), 60_000);
    app.child.on('message', (m: { profile?: Profile; profileError?: string }) => {
      clearTimeout(timer);
      if (m.profile) resolve(m.profile);
      else reject(new Error(`the app could not profile: ${m.profileError}`));
    });
    app.child.once('exit', () => reject(new Error('the app exited while profiled')));
  });
  app.child.send('profile:start');
  // The profiler's start is asynchronous in the app: a moment for it before the load.
  await new Promise((resolve) => setTimeout(resolve, 100));
  const sample = await pacedLoad(app.url, rate, seconds, 64);
  app.child.send('profile:stop');
  return { sample, profile: await profile };
}

const variants = (process.argv[2] ?? 'none,floor-redis,nrl-tb,rlf-redis').split(',');
if (!variants.includes('none')) variants.unshift('none');
const platform = process.env.BENCH_PROFILE_PLATFORM ?? 'fastify';
const rate = Number(process.env.BENCH_RATE ?? 5000);
const seconds = Number(process.env.BENCH_PROFILE_S ?? 10);
const out = fileURLToPath(new URL('../../results/', import.meta.url));
mkdirSync(out, { recursive: true });

pin(process.pid, DRIVER_CORE);
const redis = await startRedis();
pin(redis.pid, DRIVER_CORE);
console.log(pinningLine());
const results = new Map<string, ReturnType<typeof summarise>>();
try {
  for (const variant of variants) {
    const app = await startApp(platform, variant, redis.url);
    try {
      const { sample, profile } = await profiled(app, rate, seconds);
      writeFileSync(`${out}profile-${variant}.cpuprofile`, JSON.stringify(profile));
      console.log(`${variant}: ${Math.round(sample.rps)} req/s, ${sample.requests} requests`);
      results.set(variant, summarise(profile, sample.requests));
    } finally {
      await app.stop();
    }
  }
} finally {
  await redis.stop();
}

const places = [...new Set([...results.values()].flatMap((r) => [...r.places.keys()]))];
const us = (variant: string, place: string) => results.get(variant)!.places.get(place) ?? 0;
const total = (variant: string) => places.reduce((sum, p) => sum + us(variant, p), 0);
places.sort((a, b) => us(variants.at(-1)!, b) - us(variants.at(-1)!, a));
const cell = (v: string, value: number, none: number) =>
  v === 'none'
    ? value.toFixed(1)
    : `${value.toFixed(1)} (${value - none >= 0 ? '+' : ''}${(value - none).toFixed(1)})`;
console.log(
  `\nCPU µs per request sampled in the app at ${rate} req/s on ${platform}, by where the function lives (over none in brackets):`,
);
console.log(
  table(
    ['place', ...variants],
    [
      ...places.map((p) => [p, ...variants.map((v) => cell(v, us(v, p), us('none', p)))]),
      ['total', ...variants.map((v) => cell(v, total(v), total('none')))],
    ],
  ),
);
for (const v of variants) {
  const ours = [...results.get(v)!.ours].sort((a, b) => b[1] - a[1]).slice(0, 15);
  if (!ours.length) continue;
  console.log(`\n${v}: this package's functions, self µs per request:`);
  console.log(
    table(
      ['function', 'µs'],
      ours.map(([f, t]) => [f, t.toFixed(2)]),
    ),
  );
}
