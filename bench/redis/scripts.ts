/**
 * Part 3b: each script under redis-benchmark (EVALSHA, random identities), which gives the
 * Redis-side cost without Node in the way. The `floor` contender (an empty script) and one
 * INCR set the scale.
 */
import { spawn } from 'node:child_process';
import type { Redis } from 'ioredis';
import { DRIVER_CORE, pin } from '../pin.js';
import { fmt, median, table } from '../support.js';
import { currentOf, isBase } from '../twins.js';
import type { Contender } from './contenders.js';
import type { LayoutProbe } from './layouts.js';
import { commandStats } from './store.js';

export interface ScriptRow {
  script: string;
  usecPerCall: number;
  /** Calls per second redis-benchmark reached (client-bound; for orientation only). */
  callsPerSecond: number;
}

const SCALE = [
  {
    name: 'one INCR',
    lua: "return redis.call('INCR', KEYS[1])",
    keys: ['incr:__rand_int__'],
    args: [] as (string | number)[],
  },
];

function redisBenchmark(port: number, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('redis-benchmark', ['-p', String(port), ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    pin(child.pid, DRIVER_CORE);
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', reject);
    child.once('exit', (code) => {
      // -q --csv prints `"EVALSHA ...","<requests per second>",...`
      const match = /"([\d.]+)"/.exec(
        output.split('\n').find((l) => l.startsWith('"EVALSHA')) ?? '',
      );
      if (code !== 0 || !match) reject(new Error(`redis-benchmark failed (${code}):\n${output}`));
      else resolve(Number(match[1]));
    });
  });
}

/**
 * An `@base` twin's script is given the current arguments: one call first, where a script
 * that takes others most likely fails. True when it answered; logs why not, or that its
 * script differs from the current one (so the arguments may not mean the same to it).
 */
async function runsOnce(
  admin: Redis,
  name: string,
  script: NonNullable<Contender['script']>,
  ofOurs: Map<string, string | undefined>,
  log: (line: string) => void,
): Promise<boolean> {
  // redis-benchmark puts a 12-digit number in place of __rand_int__.
  const keys = script.keys.map((k) => k.replaceAll('__rand_int__', '000000000000'));
  try {
    await admin.eval(script.lua, keys.length, ...keys, ...script.args);
  } catch (error) {
    log(
      `Part 3b leaves ${name} out: its script refused the current arguments (${error instanceof Error ? error.message : String(error)})`,
    );
    return false;
  }
  if (script.lua !== ofOurs.get(currentOf(name))) {
    log(`Part 3b: ${name}'s script differs from ${currentOf(name)}'s; given the same arguments`);
  }
  return true;
}

export async function runScriptBench(options: {
  admin: Redis;
  port: number;
  contenders: Contender[];
  rounds: number;
  requests: number;
  /** Scripts measured beside the contenders' (see layouts.ts). */
  probes?: LayoutProbe[];
  log: (line: string) => void;
}): Promise<ScriptRow[]> {
  const ofOurs = new Map(options.contenders.map((c) => [c.name, c.script?.lua]));
  const scripts = [...SCALE];
  const missing = options.contenders.filter((c) => !c.script).map((c) => c.name);
  if (missing.length) {
    options.log(
      `Part 3b leaves ${missing.join(', ')} out: no consume script in their build (CONSUME_SCRIPT of core/stores/redis/lua/consume.js, in dist/cjs/ or beside the entry)`,
    );
  }
  for (const c of options.contenders) {
    if (!c.script) continue;
    if (isBase(c.name) && !(await runsOnce(options.admin, c.name, c.script, ofOurs, options.log)))
      continue;
    scripts.push({ name: c.name, ...c.script });
  }
  scripts.push(...(options.probes ?? []));
  const usec = new Map<string, number[]>();
  const rps = new Map<string, number[]>();
  for (let round = 0; round < options.rounds; round++) {
    for (const s of scripts) {
      const sha = (await options.admin.script('LOAD', s.lua)) as string;
      await options.admin.config('RESETSTAT');
      const perSecond = await redisBenchmark(options.port, [
        '-n',
        String(options.requests),
        '-c',
        '16',
        '-r',
        '100000',
        '-q',
        '--csv',
        'EVALSHA',
        sha,
        String(s.keys.length),
        ...s.keys,
        ...s.args.map(String),
      ]);
      const stats = await commandStats(options.admin, 'evalsha');
      (usec.get(s.name) ?? usec.set(s.name, []).get(s.name)!).push(stats.usec / stats.calls);
      (rps.get(s.name) ?? rps.set(s.name, []).get(s.name)!).push(perSecond);
    }
  }
  const rows = scripts.map((s) => ({
    script: s.name,
    usecPerCall: median(usec.get(s.name)!),
    callsPerSecond: median(rps.get(s.name)!),
  }));
  const rlf = rows.find((r) => r.script === 'rlf-redis')!;
  const floor = rows.find((r) => r.script === 'floor')!;
  options.log(
    `\nPart 3b. redis-benchmark EVALSHA, ${options.requests} calls, c=16, 100000 random identities (median of ${options.rounds})`,
  );
  options.log(
    table(
      ['script', 'usec_per_call', '×rlf', '×floor', 'calls/s'],
      rows.map((r) => [
        r.script,
        fmt(r.usecPerCall),
        fmt(r.usecPerCall / rlf.usecPerCall),
        fmt(r.usecPerCall / floor.usecPerCall),
        Math.round(r.callsPerSecond),
      ]),
    ),
  );
  const of = (name: string) => rows.find((r) => r.script === name)?.usecPerCall;
  const ratio = (a: string, b: string) => {
    const [x, y] = [of(a), of(b)];
    return x === undefined || y === undefined ? '–' : fmt(x / y);
  };
  if (options.probes?.length) {
    options.log(
      `layouts, two stacked ÷ one: key per policy ${ratio('layout: key per policy, 2', 'layout: key per policy, 1')}, key per identity ${ratio('layout: key per identity, 2', 'layout: key per identity, 1')}; one policy, key per identity ÷ key per policy: ${ratio('layout: key per identity, 1', 'layout: key per policy, 1')}; nrl-stacked ÷ nrl-gcra: ${ratio('nrl-stacked', 'nrl-gcra')}`,
    );
  }
  return rows;
}
