import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface, type Interface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ALGORITHMS } from '../../lib/core/model/policy.js';

const WORKER = fileURLToPath(new URL('../harness/consume-worker.ts', import.meta.url));

/** One OS process running consume-worker.ts, answering one line per job. */
class Worker {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly lines: Interface;
  private readonly pending: ((line: string) => void)[] = [];
  private stderr = '';

  constructor() {
    this.child = spawn(process.execPath, ['--import', 'tsx', WORKER], { env: process.env });
    this.child.stderr.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.lines = createInterface({ input: this.child.stdout });
    this.lines.on('line', (line) => this.pending.shift()?.(line));
    this.child.on('exit', (code) => {
      for (const reject of this.pending.splice(0)) reject(`exit ${code}: ${this.stderr}`);
    });
  }

  next(): Promise<string> {
    return new Promise((resolve) => this.pending.push(resolve));
  }

  async run(job: object): Promise<number> {
    const reply = this.next();
    this.child.stdin.write(`${JSON.stringify(job)}\n`);
    const line = await reply;
    const parsed = JSON.parse(line) as { admitted?: number };
    if (typeof parsed.admitted !== 'number') throw new Error(`worker said: ${line}`);
    return parsed.admitted;
  }

  stop(): void {
    this.child.stdin.end();
    this.child.kill();
  }
}

describe('concurrency: 4 OS processes × 100 concurrent consumes on one key with limit 50', () => {
  const workers: Worker[] = [];

  beforeAll(async () => {
    for (let i = 0; i < 4; i++) workers.push(new Worker());
    const ready = await Promise.all(workers.map((w) => w.next()));
    expect(ready).toEqual(['ready', 'ready', 'ready', 'ready']);
  }, 60_000);

  afterAll(() => workers.forEach((w) => w.stop()));

  describe.each(['standalone', 'cluster'] as const)('Redis %s', (target) => {
    it.each(ALGORITHMS)('%s admits exactly 50', async (algorithm) => {
      const job = {
        target,
        algorithm,
        prefix: `c${randomUUID().slice(0, 8)}`,
        identity: 'hot',
        rate: '50/h',
        requests: 100,
      };
      const admitted = await Promise.all(workers.map((w) => w.run(job)));
      expect(admitted.reduce((a, b) => a + b, 0)).toBe(50);
    });
  });
});
