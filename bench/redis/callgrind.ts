/**
 * `npm run bench:callgrind`: the Redis cost of one decision of each store contender
 * (contenders.ts), in instructions rather than time, so that a figure repeats on a loaded
 * machine. A private redis-server runs under `valgrind --tool=callgrind`, collecting only
 * inside `evalGenericCommand` (what EVAL and EVALSHA run: the script and every command it
 * calls; not the parsing of the request nor the writing of the reply). Each contender makes
 * `CALLGRIND_CALLS` decisions after a warm-up; the counters are zeroed before and dumped
 * after (`callgrind_control`); the figure is the median over `CALLGRIND_ROUNDS` of the
 * instructions divided by the calls.
 *
 *   CALLGRIND_CALLS=3000    decisions per contender per round
 *   CALLGRIND_ROUNDS=3      rounds (interleaved: every contender once per round)
 *   CALLGRIND_ONLY=a,b      only these contenders (with their `@base` twins)
 *   BENCH_BASELINE=<ref>    each of ours also on that ref's build, `@base` (see baseline.ts)
 *
 * Two identity patterns: `new`, every decision for an identity with no state (its first
 * request), and `existing`, decisions cycling over CALLGRIND_CALLS / 5 identities that already have state
 * (all admitted: the budget is contenders.ts's BUSY). It first prints what each contender
 * sends for one decision, as MONITOR shows it, so that the counted command is known to be the
 * one a decision makes (rate-limiter-flexible's RateLimiterRedis: one EVALSHA of its
 * increment script). Needs valgrind and redis-server on the PATH; not part of `npm test`.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { once } from 'node:events';
import { createConnection } from 'node:net';
import { prepareBaseline } from '../baseline.js';
import { freePort, median, table } from '../support.js';
import { currentOf, isBase } from '../twins.js';
import { contenders, newClient, type Contender } from './contenders.js';

const env = process.env;
const CALLS = Number(env.CALLGRIND_CALLS ?? 3000);
const ROUNDS = Number(env.CALLGRIND_ROUNDS ?? 3);
const ONLY = env.CALLGRIND_ONLY?.split(',');
/**
 * Identities of the `existing` pattern: each gets 5 decisions per round after its first, within
 * every contender's budget (nrl-gcra-7ps admits 7 at once).
 */
const EXISTING = Math.max(1, Math.floor(CALLS / 5));
/** Decisions in flight at once (the count per call does not depend on it). */
const IN_FLIGHT = 32;
const run = promisify(execFile);

interface Valgrinded {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** Zeroes the counters. */
  zero(): Promise<void>;
  /** Dumps the counters; resolves with the instructions counted since the last zero. */
  dump(): Promise<number>;
  stop(): Promise<void>;
}

async function startValgrinded(dir: string): Promise<Valgrinded> {
  const port = await freePort();
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--toggle-collect=evalGenericCommand',
      `--callgrind-out-file=${join(dir, 'callgrind.out')}`,
      'redis-server',
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const kill = () => child.kill('SIGKILL');
  process.on('exit', kill);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let errors = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (errors += chunk));
  await new Promise<void>((resolve, reject) => {
    let output = '';
    child.once('error', reject);
    void exited.then(() => reject(new Error(`valgrind redis-server exited:\n${output}${errors}`)));
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      if (output.includes('Ready to accept connections')) resolve();
    });
  });
  const pid = child.pid!;
  let dumps = 0;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid,
    zero: async () => {
      await run('callgrind_control', ['--zero', String(pid)]);
    },
    dump: async () => {
      await run('callgrind_control', ['--dump', String(pid)]);
      dumps++;
      // Dumps are numbered callgrind.out.1, .2, ...: read the one just written.
      const file = readdirSync(dir).find((f) => f === `callgrind.out.${dumps}`);
      if (!file) throw new Error(`no dump ${dumps} in ${dir}`);
      const text = readFileSync(join(dir, file), 'utf8');
      const total = /^(?:summary|totals):\s+(\d+)/m.exec(text);
      if (!total) throw new Error(`no total in ${file}`);
      return Number(total[1]);
    },
    stop: async () => {
      process.off('exit', kill);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/** Runs `decide` for each identity, IN_FLIGHT at a time; throws when one is refused. */
async function decideAll(c: Contender, identities: readonly string[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < identities.length) {
      const id = identities[next++]!;
      if (!(await c.decide(id))) throw new Error(`${c.name} refused ${id}: the budget ran out`);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

/**
 * What each of `list` sends for one decision (its second: the first may load its script), as
 * MONITOR shows it: the scripts clients sent and the commands scripts called; long arguments
 * cut. MONITOR is read on a plain socket (its lines are `+<time> [<db> <source>] "<arg>" ...`).
 */
async function sentFor(list: readonly Contender[], port: number): Promise<Map<string, string[]>> {
  const socket = createConnection(port, '127.0.0.1');
  await once(socket, 'connect');
  let current: string[] | undefined;
  let pending = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    const lines = pending.split('\r\n');
    pending = lines.pop()!;
    for (const line of lines) {
      const match = /^\+[\d.]+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
      if (!match || !current) continue;
      const args = [...match[2]!.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!);
      const command = args[0]?.toLowerCase();
      // The module's background reads (its index of controlled identities) are left out.
      if (match[1] !== 'lua' && command !== 'evalsha' && command !== 'eval') continue;
      current.push(args.map((a) => (a.length > 44 ? `${a.slice(0, 12)}…` : a)).join(' '));
    }
  });
  socket.write('MONITOR\r\n');
  const settle = () => new Promise((resolve) => setTimeout(resolve, 300));
  await settle();
  const sent = new Map<string, string[]>();
  for (const c of list) {
    await c.decide('monitor-probe');
    await settle();
    current = [];
    sent.set(c.name, current);
    await c.decide('monitor-probe');
    await settle();
    current = undefined;
  }
  socket.destroy();
  return sent;
}

const log = (line: string) => console.log(line);
const dir = mkdtempSync(join(tmpdir(), 'nrl-callgrind-'));
const base = env.BENCH_BASELINE ? await prepareBaseline(env.BENCH_BASELINE, log) : undefined;
const redis = await startValgrinded(dir);
const client = newClient(redis.url);
try {
  const list = contenders(client, undefined, base).filter(
    (c) => !ONLY || ONLY.includes(currentOf(c.name)),
  );
  log(
    `valgrind --tool=callgrind --toggle-collect=evalGenericCommand redis-server (pid ${redis.pid})`,
  );
  log('\nWhat one decision sends (MONITOR):');
  for (const [name, lines] of await sentFor(
    list.filter((c) => !isBase(c.name)),
    redis.port,
  )) {
    for (const line of lines) log(`  ${name}: ${line}`);
  }
  const patterns = ['new', 'existing'] as const;
  const counts = new Map<string, number[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of list) {
      for (const pattern of patterns) {
        const ids =
          pattern === 'new'
            ? Array.from({ length: CALLS }, (_, k) => `${c.name}:new-${round}-${k}`)
            : Array.from({ length: CALLS }, (_, k) => `${c.name}:old-${round}-${k % EXISTING}`);
        // Warm-up: the script loaded (a first EVALSHA may answer NOSCRIPT and be sent as EVAL),
        // and for `existing`, every identity given its state.
        await decideAll(
          c,
          pattern === 'new'
            ? [`${c.name}:warm-a`, `${c.name}:warm-b`]
            : Array.from({ length: EXISTING }, (_, k) => `${c.name}:old-${round}-${k}`),
        );
        await redis.zero();
        await decideAll(c, ids);
        const perCall = (await redis.dump()) / CALLS;
        const key = `${c.name} ${pattern}`;
        (counts.get(key) ?? counts.set(key, []).get(key)!).push(perCall);
      }
    }
    log(`round ${round + 1} of ${ROUNDS} done`);
  }
  const of = (name: string, pattern: string) => median(counts.get(`${name} ${pattern}`) ?? [NaN]);
  const spread = (name: string, pattern: string) => {
    const v = counts.get(`${name} ${pattern}`) ?? [];
    return v.length ? Math.round(Math.max(...v) - Math.min(...v)) : NaN;
  };
  log(
    `\nInstructions per call inside evalGenericCommand (median of ${ROUNDS} rounds of ${CALLS} calls; spread: max - min)`,
  );
  log(
    table(
      ['contender', 'new', '×rlf', 'existing', '×rlf', 'spread new/existing'],
      list.map((c) => [
        c.name,
        Math.round(of(c.name, 'new')),
        (of(c.name, 'new') / of('rlf-redis', 'new')).toFixed(2),
        Math.round(of(c.name, 'existing')),
        (of(c.name, 'existing') / of('rlf-redis', 'existing')).toFixed(2),
        `${spread(c.name, 'new')}/${spread(c.name, 'existing')}`,
      ]),
    ),
  );
  const stacked = (pattern: string) =>
    (of('nrl-stacked', pattern) / of('nrl-gcra', pattern)).toFixed(2);
  if (counts.has('nrl-stacked new') && counts.has('nrl-gcra new')) {
    log(`nrl-stacked ÷ nrl-gcra: new ${stacked('new')}, existing ${stacked('existing')}`);
  }
} finally {
  client.disconnect();
  await redis.stop();
  base?.remove();
  rmSync(dir, { recursive: true, force: true });
}
