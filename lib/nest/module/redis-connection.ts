import type { Logger } from '@nestjs/common';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { errorsLink, seeErrorsPage } from '../../core/errors-page.js';

/** Whether `redis` is a client of the app's (ioredis `Redis` or `Cluster`), not a URL or options. */
export function isClient(redis: unknown): redis is Redis | Cluster {
  return typeof (redis as Redis).evalsha === 'function';
}

/**
 * A client of our own, tuned for rate limiting (no re-sent or queued commands, no
 * auto-pipelining), connected for at most `waitMs` **ms** before the app goes on without it
 * (ioredis keeps reconnecting); an outage is logged once, not per attempt. The module's client
 * and the throttler drop-in's `RateLimitRedisStorage` both open theirs here.
 */
export async function connect(
  redis: string | RedisOptions,
  waitMs: number,
  logger: Logger,
): Promise<Redis> {
  const { Redis } = await import('ioredis');
  const tuned: RedisOptions = {
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    // Off: below saturation almost every batch is one command, and ioredis's
    // auto-pipelining builds a Pipeline and waits a turn for each: at a fixed 5,000 req/s the
    // empty-script floor cost +62.7 µs of CPU per request with it, +22.0 without, and the same
    // at saturation (bench/floor.ts, FLOOR_CLIENTS).
    enableAutoPipelining: false,
    lazyConnect: true,
  };
  const client =
    typeof redis === 'string' ? new Redis(redis, tuned) : new Redis({ ...redis, ...tuned });
  let down = false;
  client.on('error', (error: Error) => {
    // ioredis reconnects by itself; say so once per outage, not once per attempt. Requests
    // report their own failures as rate_limit.backend_error.
    if (!down) {
      const fields = { message: error.message, docs: errorsLink('rate_limit.redis_unreachable') };
      logger.warn(`rate_limit.redis_unreachable ${JSON.stringify(fields)}`);
    }
    down = true;
  });
  client.on('ready', () => {
    if (down) logger.log('Redis is reachable again');
    down = false;
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waited = await Promise.race([
    client.connect().then(
      () => true,
      () => false,
    ),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), waitMs))),
  ]);
  clearTimeout(timer);
  if (!waited)
    logger.warn(
      `Redis not reachable within ${waitMs} ms: starting anyway; limits apply once it is ${seeErrorsPage('rate_limit.redis_unreachable')}`,
    );
  return client;
}
