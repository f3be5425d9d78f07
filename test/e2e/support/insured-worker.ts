/**
 * One Nest app in an OS process of its own, for the insurance tests across processes
 * (test/e2e/insurance-processes.test.ts):
 *
 *   node --import tsx/esm test/e2e/support/insured-worker.ts '<RateLimitModuleOptions as JSON>'
 *
 * serves GET /insured (`5/m`, fixed window, `onStoreFailure: 'local'`, identity from the
 * `x-user` header) and GET /metrics (this module's Prometheus metrics), on 127.0.0.1, prints
 * `listening <url>`, and serves until its stdin closes (SIGKILL stops it as a crash would).
 */
import 'reflect-metadata';
import { Controller, Get, Header } from '@nestjs/common';
import { Registry } from 'prom-client';
import { SkipRateLimit, type RateLimitModuleOptions } from '../../../lib/index.js';
import { createApp } from './app.js';
import { InsuredController } from './insured-controller.js';

const registry = new Registry();

@Controller()
class MetricsController {
  @Get('metrics')
  @SkipRateLimit()
  @Header('content-type', 'text/plain')
  metrics() {
    return registry.metrics();
  }
}

const options = JSON.parse(process.argv[2]!) as RateLimitModuleOptions;
const h = await createApp(
  'express',
  { ...options, metrics: { registry } },
  [InsuredController, MetricsController],
  {
    userFromHeader: true,
  },
);
process.stdout.write(`listening ${h.url}\n`);
process.stdin.resume();
process.stdin.on('end', () => {
  void h.close().then(() => process.exit(0));
});
