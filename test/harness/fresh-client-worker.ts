/**
 * A separate OS process that uses a fresh ioredis client at once, before it has connected,
 * for test/integration/fresh-client.test.ts. Prints `ready` once loaded; then, for the line
 * `{ url, prefix, connectTimeoutMs, requests }` on stdin, makes a client with ioredis's
 * defaults (offline queue on), sends `requests` consumes of one identity at once, and prints
 * `{ status, outcomes }` once the client has quit: its status when they were sent, and how many
 * were admitted, refused, or failed (by kind).
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { RateLimiter, RedisStore } from '../../lib/index.js';

interface Job {
  url: string;
  prefix: string;
  connectTimeoutMs: number;
  requests: number;
}

process.stdout.write('ready\n');
for await (const line of createInterface({ input: process.stdin })) {
  const job = JSON.parse(line) as Job;
  const client = new Redis(job.url);
  const status = client.status;
  // Outcomes are what this reports; a lost connection shows in them.
  client.on('error', () => undefined);
  // ioredis's defaults on purpose, re-sending included: said so, so the store does not warn.
  const store = new RedisStore({
    client,
    connectTimeoutMs: job.connectTimeoutMs,
    acceptReplays: true,
  });
  const limiter = new RateLimiter({
    store,
    prefix: job.prefix,
    timeoutMs: 100,
  });
  const results = await Promise.all(
    Array.from({ length: job.requests }, () =>
      limiter.consume('user:fresh', { rate: '100000/h', algorithm: 'fixed-window' }).then(
        (d) => (d.allowed ? 'admitted' : 'refused'),
        (e: { kind?: string }) => e.kind ?? 'error',
      ),
    ),
  );
  const outcomes: Record<string, number> = {};
  for (const r of results) outcomes[r] = (outcomes[r] ?? 0) + 1;
  // Reported once the client has connected and quit: whatever it had queued is sent by then.
  await store.close();
  await client.quit().catch(() => undefined);
  process.stdout.write(`${JSON.stringify({ status, outcomes })}\n`);
  break;
}
