/**
 * The cooperative client's workloads against a server limiting 5 requests per 1 s per
 * `x-client`: a burst of 25 at once, and 4 concurrent loops of 10 requests each, one after
 * another. Each runs a fresh client (its own pacing state) on its own `x-client`, and counts
 * what the server answered.
 */
import { expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createRateLimitedFetch, RateLimitedError } from '../../../lib/client/index.js';

/** The servers' limit: 5 per 1 s. */
const LIMIT = 5;
const WINDOW_MS = 1000;

export interface Figures {
  /** Requests the caller got a 2xx for. */
  delivered: number;
  /** Requests given up on (RateLimitedError), by reason. */
  gaveUp: string[];
  /** 429s the server sent, retries included. */
  refusals: number;
  /** From the first send to the last answer, ms. */
  elapsedMs: number;
  /** The least time the server's limit needs for this many requests, ms. */
  leastMs: number;
}

/** The least time `n` requests need at {@link LIMIT} per {@link WINDOW_MS}, ms. */
const leastMs = (n: number) => (Math.ceil(n / LIMIT) - 1) * WINDOW_MS;

/** The acceptance bound: 1.5× the least time, plus 1 s. */
const boundMs = (n: number) => 1.5 * leastMs(n) + 1000;

/** A seeded PRNG (mulberry32), so the spread of jitter is the same on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let clients = 0;

/** A fresh client on a fresh `x-client`, and its figures so far. */
function client(url: string) {
  const id = `c${++clients}-${Date.now()}`;
  let refusals = 0;
  const fetchLimited = createRateLimitedFetch({
    random: seeded(clients),
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      if (response.status === 429) refusals++;
      return response;
    },
  });
  const gaveUp: string[] = [];
  let delivered = 0;
  const one = async () => {
    try {
      const response = await fetchLimited(`${url}/limited`, { headers: { 'x-client': id } });
      await response.arrayBuffer();
      if (response.ok) delivered++;
    } catch (error) {
      if (!(error instanceof RateLimitedError)) throw error;
      gaveUp.push(error.reason);
    }
  };
  const figures = (n: number, started: number): Figures => ({
    delivered,
    gaveUp,
    refusals,
    elapsedMs: Math.round(performance.now() - started),
    leastMs: leastMs(n),
  });
  return { one, figures };
}

/** `n` requests sent at once. */
export async function burst(url: string, n = 25): Promise<Figures> {
  const c = client(url);
  const started = performance.now();
  await Promise.all(Array.from({ length: n }, () => c.one()));
  return c.figures(n, started);
}

/** `loops` concurrent loops, each sending `each` requests one after another. */
export async function loops(url: string, loopCount = 4, each = 10): Promise<Figures> {
  const c = client(url);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: loopCount }, async () => {
      for (let i = 0; i < each; i++) await c.one();
    }),
  );
  return c.figures(loopCount * each, started);
}

/** Prints a row of figures when CLIENT_FIGURES=1 (for the README's table). */
export function report(server: string, workload: string, f: Figures): void {
  if (process.env.CLIENT_FIGURES !== '1') return;
  process.stdout.write(
    `FIGURES ${server} | ${workload} | delivered ${f.delivered}, 429s ${f.refusals}, ` +
      `${f.elapsedMs} ms vs least ${f.leastMs} ms (${(f.elapsedMs / Math.max(1, f.leastMs)).toFixed(2)}×)` +
      `${f.gaveUp.length ? `, gave up: ${f.gaveUp.join(',')}` : ''}\n`,
  );
}

/** The peer servers (test/client/support/peer-servers.ts) in a child process: name → URL. */
export async function startPeerServers(): Promise<{
  urls: Record<string, string>;
  stop(): Promise<void>;
}> {
  const script = fileURLToPath(new URL('./peer-servers.ts', import.meta.url));
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx/esm', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const urls = await new Promise<Record<string, string>>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = /^listening (.*)$/m.exec(out);
      if (line) resolve(JSON.parse(line[1]!) as Record<string, string>);
    });
    child.once('exit', (code) => reject(new Error(`peer servers exited ${code}: ${err}`)));
  });
  return {
    urls,
    stop: async () => {
      if (child.exitCode === null) {
        child.kill();
        await once(child, 'exit');
      }
    },
  };
}

/**
 * The target on a server that states its limit, as two tests: a burst of 25 and 4 concurrent
 * loops of 10 are each delivered whole, with at most 3 refusals, within 1.5× the least time
 * the limit needs plus 1 s. `url` is read when a test runs (servers start in `beforeAll`).
 */
export function itMeetsTheTarget(server: string, url: () => string): void {
  it('delivers a burst of 25 with at most 3 refusals, within 1.5× the least time plus 1 s', async () => {
    const f = await burst(url());
    report(server, 'burst of 25', f);
    expect(f.gaveUp).toEqual([]);
    expect(f.delivered).toBe(25);
    expect(f.refusals).toBeLessThanOrEqual(3);
    expect(f.elapsedMs).toBeLessThanOrEqual(boundMs(25));
  }, 30_000);

  it('delivers 4 concurrent loops of 10 with at most 3 refusals, within 1.5× the least time plus 1 s', async () => {
    const f = await loops(url());
    report(server, '4 loops of 10', f);
    expect(f.gaveUp).toEqual([]);
    expect(f.delivered).toBe(40);
    expect(f.refusals).toBeLessThanOrEqual(3);
    expect(f.elapsedMs).toBeLessThanOrEqual(boundMs(40));
  }, 30_000);
}
