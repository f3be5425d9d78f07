/**
 * Rate-limited servers others wrote, for the cooperative client's tests
 * (test/client/peer-servers.e2e.test.ts), in a process of their own: the throttler is
 * CommonJS and requires @nestjs/common, which NestJS 12 ships as ESM only (Node loads that,
 * Jest's module runtime does not).
 *
 *   node --import tsx/esm test/client/support/peer-servers.ts
 *
 * starts, on 127.0.0.1, one server per entry of {@link PEER_SERVERS}, each limiting 5 requests
 * per 1 s per `x-client` header, prints `listening {"<name>": "<url>", …}` and serves until
 * killed.
 */
import 'reflect-metadata';
import type { Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { Controller, Get, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { rateLimit, type Options } from 'express-rate-limit';

/** What this file uses of Express 5 (a dependency of @nestjs/platform-express, untyped here). */
interface ExpressApp {
  use(handler: unknown): void;
  get(path: string, handler: (req: unknown, res: { json(body: unknown): void }) => void): void;
  listen(port: number, host: string, listening: () => void): Server;
}
const express = createRequire(import.meta.url)('express') as () => ExpressApp;

/** Each server's name, and express-rate-limit's header options where it is one. */
export const PEER_SERVERS = {
  'express-rate-limit draft-6': { standardHeaders: 'draft-6', legacyHeaders: false },
  'express-rate-limit draft-7': { standardHeaders: 'draft-7', legacyHeaders: false },
  'express-rate-limit draft-8': { standardHeaders: 'draft-8', legacyHeaders: false },
  'express-rate-limit legacy headers': { standardHeaders: false, legacyHeaders: true },
  // No rate-limit field at all: only the refusal's Retry-After (express-rate-limit sends none
  // without its headers; its handler sends it here, in whole seconds rounded up).
  'Retry-After only': {
    standardHeaders: false,
    legacyHeaders: false,
    handler: (req, res) => {
      const resetTime = (req as { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const seconds = Math.max(1, Math.ceil(((resetTime?.getTime() ?? 0) - Date.now()) / 1000));
      res.setHeader('Retry-After', String(seconds));
      res.status(429).send('Too many requests');
    },
  },
  '@nestjs/throttler 6.7.1': undefined,
} as const satisfies Record<string, Partial<Options> | undefined>;

export type PeerServer = keyof typeof PEER_SERVERS;

const clientOf = (headers: Record<string, unknown>) => String(headers['x-client'] ?? '');

function expressRateLimit(options: Partial<Options>): Promise<string> {
  const app = express();
  app.use(
    rateLimit({
      windowMs: 1000,
      limit: 5,
      keyGenerator: (req) => clientOf(req.headers as Record<string, unknown>),
      validate: false,
      ...options,
    }),
  );
  app.get('/limited', (_req, res) => {
    res.json({ ok: true });
  });
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    );
  });
}

@Controller('limited')
class LimitedController {
  @Get()
  get() {
    return { ok: true };
  }
}

class HeaderThrottlerGuard extends ThrottlerGuard {
  protected override getTracker(req: Record<string, unknown>): Promise<string> {
    return Promise.resolve(clientOf(req.headers as Record<string, unknown>));
  }
}

async function throttler(): Promise<string> {
  @Module({
    // The throttler's defaults otherwise: a block of one ttl after a refusal.
    imports: [ThrottlerModule.forRoot([{ ttl: 1000, limit: 5 }])],
    controllers: [LimitedController],
    providers: [{ provide: APP_GUARD, useClass: HeaderThrottlerGuard }],
  })
  class ThrottlerApp {}
  const app = await NestFactory.create(ThrottlerApp, { logger: false, abortOnError: false });
  await app.listen(0, '127.0.0.1');
  return (await app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
}

async function main(): Promise<void> {
  const urls: Record<string, string> = {};
  for (const [name, options] of Object.entries(PEER_SERVERS)) {
    urls[name] = options ? await expressRateLimit(options) : await throttler();
  }
  console.log(`listening ${JSON.stringify(urls)}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack : error);
  process.exit(1);
});
