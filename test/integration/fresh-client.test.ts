/**
 * A fresh ioredis client, used before it has connected (issue 22, finding 11): four OS
 * processes each make a client with ioredis's defaults (offline queue on) and send 100
 * consumes at once, while the server holds new connections' first commands for 500 ms
 * (`CLIENT PAUSE 500 ALL`: the connection takes that long to become ready). Before the fix
 * the connection's time counted against `timeoutMs` (100 ms): every call timed out, and the
 * offline queue sent them all once connected, counting 400 requests nobody had decided on.
 * Now a call waits for the first connection (up to `connectTimeoutMs`) before its timeout
 * starts, and a call that does not get a connection in time is never sent.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { CONSUME_SCRIPT, CONSUME_SHA } from '../../lib/core/stores/redis/lua/consume.js';
import { disconnect, startRedisServer, type RedisServerHandle } from '../harness/redis.js';

const WORKER = fileURLToPath(new URL('../harness/fresh-client-worker.ts', import.meta.url));
const PAUSE_MS = 500;

interface Report {
  status: string;
  outcomes: Record<string, number>;
}

/** One OS process running fresh-client-worker.ts: one job, one report. */
class Worker {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly pending: ((line: string) => void)[] = [];
  private stderr = '';

  constructor() {
    this.child = spawn(process.execPath, ['--import', 'tsx', WORKER], { env: process.env });
    this.child.stderr.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    createInterface({ input: this.child.stdout }).on('line', (l) => this.pending.shift()?.(l));
    this.child.on('exit', (code) => {
      for (const fail of this.pending.splice(0)) fail(`exit ${code}: ${this.stderr}`);
    });
  }

  next(): Promise<string> {
    return new Promise((resolve) => this.pending.push(resolve));
  }

  async run(job: object): Promise<Report> {
    const reply = this.next();
    this.child.stdin.write(`${JSON.stringify(job)}\n`);
    const line = await reply;
    try {
      return JSON.parse(line) as Report;
    } catch {
      throw new Error(`worker said: ${line}`);
    }
  }

  stop(): void {
    this.child.kill();
  }
}

describe('a fresh Redis client used before it has connected', () => {
  let server: RedisServerHandle;
  let admin: Redis;

  beforeAll(async () => {
    server = await startRedisServer();
    admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    // Loaded, as other processes on the same Redis have loaded it: each call is one EVALSHA.
    expect(await admin.script('LOAD', CONSUME_SCRIPT)).toBe(CONSUME_SHA);
  });
  afterAll(async () => {
    if (admin) disconnect(admin);
    await server?.kill();
  });

  /** Four workers, started and loaded; the connection of each is slowed, then the job runs. */
  async function fourProcesses(job: { prefix: string; connectTimeoutMs: number }) {
    const workers = Array.from({ length: 4 }, () => new Worker());
    try {
      expect(await Promise.all(workers.map((w) => w.next()))).toEqual(new Array(4).fill('ready'));
      // Every client's first commands (its ready check) wait out the pause; this one too.
      expect(await admin.call('CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL')).toBe('OK');
      const reports = await Promise.all(
        workers.map((w) => w.run({ url: server.url, requests: 100, ...job })),
      );
      // A fixed window's value: its count.
      const state = await admin.get(`${job.prefix}:{user:fresh}:::fwc`);
      const counted = state === null ? 0 : Number(state.split(':')[0]);
      console.log(`fresh clients: ${JSON.stringify(reports)}; counted in Redis ${counted}`);
      return { reports, counted };
    } finally {
      workers.forEach((w) => w.stop());
    }
  }

  it('the first calls wait for the connection, then are decided: none times out, each counted once', async () => {
    const prefix = `fresh${randomUUID().slice(0, 8)}`;
    const { reports, counted } = await fourProcesses({ prefix, connectTimeoutMs: 10_000 });
    // Sent while the client was still connecting.
    expect(reports.map((r) => r.status)).toEqual(new Array(4).fill('connecting'));
    expect(reports.map((r) => r.outcomes)).toEqual(new Array(4).fill({ admitted: 100 }));
    expect(counted).toBe(400);
    // Four processes loading TypeScript: slow on a loaded machine.
  }, 90_000);

  it('calls that get no connection within connectTimeoutMs fail unsent: nothing counted behind their back', async () => {
    const prefix = `fresh${randomUUID().slice(0, 8)}`;
    const { reports, counted } = await fourProcesses({ prefix, connectTimeoutMs: 50 });
    expect(reports.map((r) => r.outcomes)).toEqual(new Array(4).fill({ unavailable: 100 }));
    // Read once every worker's client has connected and quit: it could have sent them by then.
    expect(counted).toBe(0);
  }, 90_000);
});
