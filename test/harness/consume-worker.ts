/**
 * A separate OS process that hammers one key, for the concurrency tests. Protocol on
 * stdin/stdout, one JSON object per line:
 *   parent -> worker: { target: 'standalone' | 'cluster', algorithm, prefix, identity, rate, requests }
 *   worker -> parent: 'ready' once connected, then { admitted } per job
 * All requests of a job are sent at once, so every worker's calls are in flight together.
 */
import { createInterface } from 'node:readline';
import { Cluster, Redis } from 'ioredis';
import { RateLimiter, RedisStore, type Algorithm } from '../../lib/index.js';

interface Job {
  target: 'standalone' | 'cluster';
  algorithm: Algorithm;
  prefix: string;
  identity: string;
  rate: string;
  requests: number;
}

// Tuned as a limiter's clients should be: never re-send a script.
const standalone = new Redis(process.env.NRL_TEST_REDIS_URL!, {
  autoResendUnfulfilledCommands: false,
});
const cluster = new Cluster(
  process.env.NRL_TEST_CLUSTER_NODES!.split(',').map((n) => {
    const [host, port] = n.split(':');
    return { host: host!, port: Number(port) };
  }),
  { retryDelayOnFailover: 0, redisOptions: { autoResendUnfulfilledCommands: false } },
);
await Promise.all([standalone.ping(), cluster.ping()]);
process.stdout.write('ready\n');

for await (const line of createInterface({ input: process.stdin })) {
  const job = JSON.parse(line) as Job;
  const limiter = new RateLimiter({
    store: new RedisStore({ client: job.target === 'cluster' ? cluster : standalone }),
    prefix: job.prefix,
    timeoutMs: 10_000,
  });
  const decisions = await Promise.all(
    Array.from({ length: job.requests }, () =>
      limiter.consume(job.identity, { rate: job.rate, algorithm: job.algorithm }),
    ),
  );
  process.stdout.write(
    `${JSON.stringify({ admitted: decisions.filter((d) => d.allowed).length })}\n`,
  );
}
standalone.disconnect();
cluster.disconnect();
