/**
 * The sample API: `npm start`, then `curl -i localhost:3000/search` (Prometheus metrics at /metrics).
 *
 *   REDIS_URL=redis://127.0.0.1:6379  keep the limits in Redis (default: this process only)
 *   PLATFORM=fastify                  run on Fastify (default: Express)
 *   PORT=3001                         listen elsewhere (default: 3000)
 */
import { Logger, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import { useDemoUsers } from './demo-user.js';

const logger = new Logger('SampleApp');
const port = Number(process.env.PORT ?? 3000);
const platform = process.env.PLATFORM === 'fastify' ? 'fastify' : 'express';

/** Where the limits live, without the password a Redis URL may carry. */
function storeLine(): string {
  const url = process.env.REDIS_URL;
  if (!url) return 'rate limits in memory: this process only; set REDIS_URL to share them';
  const shown = URL.canParse(url) ? new URL(url) : undefined;
  if (shown?.password) shown.password = '***';
  return `rate limits in Redis at ${shown?.href ?? 'REDIS_URL'}: shared by every instance on it`;
}

async function create(): Promise<INestApplication> {
  if (platform === 'express') return NestFactory.create(AppModule);
  // Imported only when asked for, so an Express-only install never loads Fastify.
  const { FastifyAdapter } = await import('@nestjs/platform-fastify');
  return NestFactory.create(AppModule, new FastifyAdapter());
}

const app = await create();
useDemoUsers(app);
// Browsers only let scripts read these headers when CORS exposes them.
app.enableCors({
  exposedHeaders: [
    'RateLimit',
    'RateLimit-Policy',
    'Retry-After',
    'X-RateLimit-Limit',
    'X-RateLimit-Remaining',
    'X-RateLimit-Reset',
  ],
});
// SIGTERM / SIGINT close the app, and with it the Redis client the module opened.
app.enableShutdownHooks();
logger.log(storeLine());
await app.listen(port);
logger.log(`listening on http://localhost:${port} (${platform})`);
logger.log(`try: curl -i localhost:${port}/search`);
