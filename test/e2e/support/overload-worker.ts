/**
 * A Nest app under overload protection in an OS process of its own, for
 * test/e2e/overload.test.ts:
 *
 *   node --import tsx/esm test/e2e/support/overload-worker.ts '{"platform":"express","prefix":"…"}'
 *
 * Its limit is fixed at 2 calls in flight (floor = ceiling), the event loop unwatched, so the
 * test saturates it with calls it holds: GET /hold (sheddable) waits until GET /open. The
 * options may add `queueMs` (the bounded queue). `metrics: true` on prom-client's default
 * registry, scraped at GET /metrics; GET /queued says how many calls wait for a slot. Logs go
 * to stdout, one line each. Prints `listening <url>`, serves until its stdin closes.
 */
import 'reflect-metadata';
import { Controller, Get, Header, type LoggerService } from '@nestjs/common';
import { register } from 'prom-client';
import {
  Priority,
  RateLimit,
  rateLimitContext,
  SkipLoadShedding,
  SkipRateLimit,
} from '../../../lib/index.js';
import { RoutePlanner } from '../../../lib/nest/plan/planner.js';
import { createApp, type Platform } from './app.js';

let waiting: (() => void)[] = [];

@Controller()
@Priority('sheddable')
class LoadController {
  @Get('hold')
  async hold() {
    await new Promise<void>((resolve) => waiting.push(resolve));
    return 'held';
  }

  @Get('limited')
  @RateLimit('3/m', { key: () => 'one-client' })
  limited() {
    return 'ok';
  }

  @Get('normal')
  @Priority('normal')
  normal() {
    return 'ok';
  }

  @Get('critical')
  @Priority('critical')
  @SkipRateLimit()
  critical() {
    return 'ok';
  }

  @Get('high')
  @Priority('high')
  high() {
    return 'ok';
  }

  /** Critical for the gold tier, sheddable for everyone else. */
  @Get('tiered')
  @Priority((ctx) =>
    rateLimitContext(ctx).request?.headers['x-tier'] === 'gold' ? 'critical' : 'sheddable',
  )
  tiered() {
    return 'ok';
  }
}

@Controller()
@SkipLoadShedding()
class OpsController {
  @Get('health')
  health() {
    return 'ok';
  }

  @Get('held')
  held() {
    return String(waiting.length);
  }

  @Get('queued')
  queued() {
    return String(planner?.overload?.protection.pool()?.waiting);
  }

  @Get('metrics')
  @Header('content-type', 'text/plain')
  metrics() {
    return register.metrics();
  }

  @Get('open')
  open() {
    const all = waiting;
    waiting = [];
    for (const resolve of all) resolve();
    return String(all.length);
  }
}

const line = (level: string) => (message: unknown, context?: unknown) => {
  process.stdout.write(`${level} [${String(context)}] ${String(message)}\n`);
};
const logger: LoggerService = {
  log: line('log'),
  warn: line('warn'),
  error: line('error'),
  debug: () => {},
  verbose: () => {},
};

const { platform, prefix, queueMs } = JSON.parse(process.argv[2]!) as {
  platform: Platform;
  prefix: string;
  queueMs?: number;
};
const h = await createApp(
  platform,
  {
    prefix,
    metrics: true,
    overload: {
      initialLimit: 2,
      minLimit: 2,
      maxLimit: 2,
      maxEventLoopDelayMs: false,
      ...(queueMs !== undefined && { queueMs }),
    },
  },
  [LoadController, OpsController],
  { logger },
);
const planner: RoutePlanner | undefined = h.app.get(RoutePlanner, { strict: false });
process.stdout.write(`listening ${h.url}\n`);
process.stdin.resume();
process.stdin.on('end', () => {
  void h.close().then(() => process.exit(0));
});
