/**
 * The app of the failover tests, in an OS process of its own, so that the hold it measures is
 * its own: the test process that sends the traffic (and polls Redis) can stall without
 * lengthening it.
 *
 *   node --import tsx/esm test/failover/app-worker.ts '<options as JSON>'
 *
 * Options: `{ sentinels, name }` (through Sentinel) or `{ cluster }` (seed nodes; the client
 * as the README asks: `retryDelayOnFailover: 0`, no re-sent commands), `timeoutMs` and `quota`.
 * Serves GET /hit (`<quota>/d`, fixed window, fail-open, identity from `x-user`) and GET /holds:
 * what `onDecision` saw, per request, of the time spent waiting on the store (`durationMs`,
 * from the call to its answer or failure), and this process's event-loop delay. Prints
 * `listening <url>`; serves until its stdin closes.
 */
import 'reflect-metadata';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Controller, Get } from '@nestjs/common';
import { Cluster } from 'ioredis';
import { RateLimit, SkipRateLimit, type RateLimitModuleOptions } from '../../lib/index.js';
import { createApp } from '../e2e/support/app.js';

interface WorkerOptions {
  sentinels?: { host: string; port: number }[];
  name?: string;
  cluster?: { host: string; port: number }[];
  timeoutMs: number;
  /** The route's daily quota. */
  quota: number;
}

const options = JSON.parse(process.argv[2]!) as WorkerOptions;

/** Store waits of the decisions so far, ms. */
const waits: number[] = [];
const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();

@Controller()
class FailoverController {
  @Get('hit')
  @RateLimit(`${options.quota}/d`, { algorithm: 'fixed-window' })
  hit() {
    return 'ok';
  }

  @Get('holds')
  @SkipRateLimit()
  holds() {
    const sorted = [...waits].sort((a, b) => a - b);
    return {
      decisions: waits.length,
      maxMs: sorted.at(-1) ?? 0,
      slowest: sorted.slice(-5),
      loopDelayMaxMs: loop.max / 1e6,
    };
  }
}

const client = options.cluster
  ? new Cluster(options.cluster, {
      retryDelayOnFailover: 0,
      redisOptions: { autoResendUnfulfilledCommands: false },
    })
  : undefined;
const moduleOptions: RateLimitModuleOptions = {
  // Without failoverDetector: with it, ioredis 6 leaves its Sentinel subscriptions open after
  // the app closes.
  redis: client ?? { sentinels: options.sentinels!, name: options.name! },
  timeoutMs: options.timeoutMs,
  circuitBreaker: { failureThreshold: 3, cooldownMs: 100 },
  onDecision: (event) => waits.push(event.durationMs),
};
const h = await createApp('express', moduleOptions, [FailoverController], {
  userFromHeader: true,
});
process.stdout.write(`listening ${h.url}\n`);
process.stdin.resume();
process.stdin.on('end', () => {
  void h.close().then(() => {
    client?.disconnect();
    process.exit(0);
  });
});
