/**
 * One Nest app in an OS process of its own, for the cross-instance concurrency test
 * (test/e2e/concurrency-instances.test.ts):
 *
 *   node --import tsx/esm test/e2e/support/slot-instance-worker.ts '{"platform":"express","prefix":"…"}'
 *
 * serves GET /one (`@ConcurrencyLimit(1)` on one identity shared by every instance) on
 * 127.0.0.1 against the shared test Redis, prints `listening <url>`, and serves until its
 * stdin closes.
 */
import 'reflect-metadata';
import { Controller, Get } from '@nestjs/common';
import { ConcurrencyLimit } from '../../../lib/index.js';
import { createApp, type Platform } from './app.js';

@Controller()
class OneAtATimeController {
  @Get('one')
  @ConcurrencyLimit(1, { key: () => 'sequential-client' })
  one() {
    return 'done';
  }
}

const { platform, prefix } = JSON.parse(process.argv[2]!) as { platform: Platform; prefix: string };
const h = await createApp(platform, { prefix }, [OneAtATimeController]);
process.stdout.write(`listening ${h.url}\n`);
process.stdin.resume();
process.stdin.on('end', () => {
  void h.close().then(() => process.exit(0));
});
