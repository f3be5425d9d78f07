/**
 * A Nest app as a fresh user writes it, for test/e2e/overload-burst.test.ts: `overload: true`
 * with every default, a trivial GET / and a trivial async GET /async (default priority
 * `normal`), in an OS process of its own so that a burst arrives on its cold event loop.
 *
 *   node --import tsx/esm test/e2e/support/overload-burst-worker.ts '{"platform":"express","prefix":"…"}'
 *
 * Logs go to stdout, one line each. Prints `listening <url>`, serves until its stdin closes.
 */
import 'reflect-metadata';
import { Controller, Get, type LoggerService } from '@nestjs/common';
import { createApp, type Platform } from './app.js';

@Controller()
class HelloController {
  @Get()
  hello() {
    return 'Hello World!';
  }

  @Get('async')
  async helloLater() {
    await new Promise<void>((resolve) => setImmediate(resolve));
    return 'Hello World!';
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

const { platform, prefix } = JSON.parse(process.argv[2]!) as { platform: Platform; prefix: string };
const h = await createApp(platform, { prefix, overload: true }, [HelloController], { logger });
process.stdout.write(`listening ${h.url}\n`);
process.stdin.resume();
process.stdin.on('end', () => {
  void h.close().then(() => process.exit(0));
});
