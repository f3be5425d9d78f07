/**
 * `npm run bench:flood`: the flood of issue 22, finding 1, against a `3/m` route keyed by IP
 * with the module's default options, on Express and Fastify, a few runs each; prints how many
 * requests were admitted (the limit is 3, so every one above 3 is a limit not enforced).
 *
 *   FLOOD_RUNS=5           runs per platform (and per build)
 *   FLOOD_CONNECTIONS=1000 keep-alive connections of the flooding client
 *   FLOOD_REQUESTS=20000   requests it sends
 *   FLOOD_PROBES=40        requests of a second client already refused, spread over the flood
 *   FLOOD_PLATFORMS=express,fastify
 *   FLOOD_DENY_CACHE=1     the same with `denyCache: true`
 *   BENCH_BASELINE=<ref>   each run also on that ref's build (`@base`), see baseline.ts
 *
 * Each run is a fresh app process (a fresh key prefix, so a fresh budget) on one private
 * Redis, and a load generator in a process of its own (flood/load.ts).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { prepareBaseline, type Baseline } from './baseline.js';
import { fmt, freePort, startRedis, table } from './support.js';

const env = process.env;
const runs = Number(env.FLOOD_RUNS ?? 5);
const connections = Number(env.FLOOD_CONNECTIONS ?? 1000);
const requests = Number(env.FLOOD_REQUESTS ?? 20_000);
const probes = Number(env.FLOOD_PROBES ?? 40);
const platforms = (env.FLOOD_PLATFORMS ?? 'express,fastify').split(',');
const denyCache = env.FLOOD_DENY_CACHE === '1';
const APP = fileURLToPath(new URL('./flood/app.js', import.meta.url));
const LOAD = fileURLToPath(new URL('./flood/load.js', import.meta.url));

interface Tally {
  admitted: number;
  failOpen: number;
  refused: number;
  other: number;
}
interface LoadResult {
  flood: Tally;
  ms: number;
  probes?: Tally;
}
interface AppStats {
  p99Ms: number;
  maxMs: number;
}

/** Runs one app and one flood against it; resolves with what the load saw and the app's delay. */
async function floodOnce(
  platform: string,
  redisUrl: string,
  prefix: string,
  base: Baseline | undefined,
): Promise<LoadResult & AppStats> {
  const port = await freePort();
  const args = [APP, platform, String(port), redisUrl, prefix, denyCache ? 'denyCache' : ''];
  const app = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    env: { ...env, ...(base && { BENCH_NRL_ENTRY: base.entry }) },
  });
  const exited = new Promise((resolve) => app.once('exit', resolve));
  try {
    await new Promise<void>((resolve, reject) => {
      let out = '';
      app.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
        if (/^ready$/m.test(out)) resolve();
      });
      void exited.then(() => reject(new Error(`flood app exited before ready:\n${out}`)));
    });
    const stats = new Promise<AppStats>((resolve) =>
      app.once('message', (m) => resolve(m as AppStats)),
    );
    app.send('stats'); // resets the delay histogram: the flood's own is read after it
    await stats;
    const options = { url: `http://127.0.0.1:${port}/limited`, connections, requests, probes };
    const load = spawn(process.execPath, [LOAD, JSON.stringify(options)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    load.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    const code = await new Promise((resolve) => load.once('exit', resolve));
    if (code !== 0) throw new Error(`load generator exited ${String(code)}:\n${out}`);
    const result = JSON.parse(out.trim().split('\n').pop()!) as LoadResult;
    const after = new Promise<AppStats>((resolve) =>
      app.once('message', (m) => resolve(m as AppStats)),
    );
    app.send('stats');
    return { ...result, ...(await after) };
  } finally {
    app.kill('SIGTERM');
    await exited;
  }
}

const log = (line: string) => console.log(line);
const base = env.BENCH_BASELINE ? await prepareBaseline(env.BENCH_BASELINE, log) : undefined;
const redis = await startRedis();
try {
  log(
    `flood: ${requests} requests over ${connections} keep-alive connections from one client to a ` +
      `'3/m' route keyed by IP, ${denyCache ? 'denyCache: true' : 'default options'}; ` +
      `${probes} probes of a client already refused`,
  );
  const builds: (Baseline | undefined)[] = base ? [undefined, base] : [undefined];
  const rows: (string | number)[][] = [];
  const admitted = new Map<string, number[]>();
  for (let run = 1; run <= runs; run++) {
    for (const platform of platforms) {
      for (const build of builds) {
        const name = `${platform}${build ? '@base' : ''}`;
        const r = await floodOnce(platform, redis.url, `fl${run}${name.replace('@', '')}`, build);
        const total = r.flood.admitted + r.flood.failOpen;
        admitted.set(name, [...(admitted.get(name) ?? []), total]);
        rows.push([
          run,
          name,
          total,
          r.flood.failOpen,
          r.flood.refused,
          r.flood.other,
          r.probes ? r.probes.admitted + r.probes.failOpen : '-',
          fmt(r.p99Ms),
          fmt(r.maxMs),
          Math.round((requests / r.ms) * 1000),
        ]);
        log(`run ${run} ${name}: admitted ${total} (fail-open ${r.flood.failOpen})`);
      }
    }
  }
  log('');
  log(
    table(
      [
        'run',
        'app',
        'admitted',
        'fail-open',
        '429',
        'other',
        `probes admitted /${probes}`,
        'loop p99 ms',
        'loop max ms',
        'req/s',
      ],
      rows,
    ),
  );
  log('');
  for (const [name, counts] of admitted) log(`${name}: admitted ${counts.join(' / ')}`);
} finally {
  await redis.stop();
  base?.remove();
}
