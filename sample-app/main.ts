/**
 * A placeholder sample app: the engine behind a plain Node HTTP server. The Nest sample
 * app replaces it once the Nest module lands.
 *
 *   npm start                                  # memory store
 *   REDIS_URL=redis://127.0.0.1:6379 npm start # shared state in Redis
 *   curl -i localhost:3000/search
 */
import { createServer } from 'node:http';
import { Redis } from 'ioredis';
import {
  MemoryStore,
  RateLimitBackendError,
  RateLimiter,
  RedisStore,
  definePolicy,
  type RateLimitStore,
} from '../lib/index.js';

const port = Number(process.env.PORT ?? 3000);
const redisUrl = process.env.REDIS_URL;

let store: RateLimitStore;
let client: Redis | undefined;
if (redisUrl) {
  // A limiter's client fails fast instead of queueing or re-sending commands.
  client = new Redis(redisUrl, {
    lazyConnect: true,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
  });
  let reported = false;
  client.on('error', (error: Error) => {
    // ioredis keeps reconnecting on its own; one line is enough to say why.
    if (!reported)
      console.warn(
        `Redis at ${redisUrl} is unreachable (${error.message}): requests are let through until it is back`,
      );
    reported = true;
  });
  client.on('ready', () => {
    reported = false;
    console.log(`rate limits are kept in Redis at ${redisUrl}`);
  });
  await client.connect().catch(() => undefined);
  store = new RedisStore({ client });
} else {
  store = new MemoryStore();
  console.log('REDIS_URL is not set: rate limits are kept in this process only (memory store)');
}

const limiter = new RateLimiter({ store });
const policies = [
  definePolicy({ name: 'burst', rate: '5/10s' }),
  definePolicy({ name: 'minute', rate: '20/m' }),
];

const server = createServer((req, res) => {
  const identity = `ip:${req.socket.remoteAddress ?? 'unknown'}`;
  const send = (status: number, body: object, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(`${JSON.stringify(body)}\n`);
  };
  if (req.url === '/health') return send(200, { ok: true });
  if (req.url?.split('?')[0] !== '/search')
    return send(404, { statusCode: 404, error: 'Not Found' });
  limiter.consume(identity, policies, { scope: 'search' }).then(
    (decision) => {
      if (decision.allowed) return send(200, { ok: true, decision });
      const wait = Math.max(...decision.policies.map((p) => p.retryAfterMs));
      const headers: Record<string, string> =
        wait === Infinity ? {} : { 'retry-after': String(Math.max(1, Math.ceil(wait / 1000))) };
      send(429, { statusCode: 429, error: 'Too Many Requests', decision }, headers);
    },
    (error: unknown) => {
      // Fail open: a store outage must not take the API down with it.
      if (!(error instanceof RateLimitBackendError)) throw error;
      console.warn(`rate_limit.backend_error kind=${error.kind}: ${error.message}`);
      send(200, { ok: true, limited: false });
    },
  );
});

server.listen(port, () =>
  console.log(`sample app on http://localhost:${port} (try: curl -i localhost:${port}/search)`),
);

const stop = () => {
  server.close();
  client?.disconnect();
  void store.close?.();
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
