/**
 * A separate OS process that changes overrides and exemptions through its own limiter, for
 * the test that another process's decisions follow them. Protocol on stdin/stdout, one JSON
 * object per line:
 *   parent -> worker: { prefix, identity, op: 'exempt' | 'removeExemption' | 'override', rate? }
 *   worker -> parent: 'ready' once connected, then 'done' per job
 */
import 'reflect-metadata';
import { createInterface } from 'node:readline';
import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimiter, RateLimitService, RedisStore } from '../../lib/index.js';

interface Job {
  prefix: string;
  identity: string;
  op: 'exempt' | 'removeExemption' | 'override';
  rate?: string;
}

// stdout is the protocol: audit lines stay out of it.
Logger.overrideLogger(false);
const client = new Redis(process.env.NRL_TEST_REDIS_URL!, { autoResendUnfulfilledCommands: false });
await client.ping();
process.stdout.write('ready\n');

for await (const line of createInterface({ input: process.stdin })) {
  const job = JSON.parse(line) as Job;
  const store = new RedisStore({ client, controlRefreshMs: 0 });
  const service = new RateLimitService(
    new RateLimiter({ store, prefix: job.prefix, timeoutMs: 10_000 }),
  );
  const options = { ttlMs: 60_000, reason: 'from another process' };
  if (job.op === 'exempt') await service.exempt(job.identity, options);
  else if (job.op === 'removeExemption') await service.removeExemption(job.identity);
  else await service.setOverride(job.identity, '*', job.rate!, options);
  process.stdout.write('done\n');
}
client.disconnect();
