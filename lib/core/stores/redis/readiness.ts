import type { Cluster, Redis } from 'ioredis';
import { quote, RateLimitBackendError, RateLimitConfigError } from '../../errors.js';

/** Statuses of a client on its way to its first connection. */
const CONNECTING = new Set(['wait', 'connecting', 'connect']);

/**
 * Whether an ioredis client can take a call now (see `RateLimitStore.ready`). Calls are never
 * handed to a client that is not ready: one with an offline queue (ioredis's default) would
 * keep them and send them once connected, counting requests the limiter had already answered
 * as timed out. A client making its first connection is waited for, up to `connectTimeoutMs`,
 * so a process's first requests are decided rather than timed out by the connection's own
 * time; one that was connected and lost its connection fails the call at once (fail-open or
 * closed as the route says, no request held while ioredis reconnects).
 */
export class ClientReadiness {
  private connected: boolean;
  private first: Promise<void> | undefined;

  /**
   * @param connectTimeoutMs longest wait for the first connection, in **ms**
   * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_STORE_OPTION` for a wait that is not an integer from 0 to 2^31-1
   */
  constructor(
    private readonly client: Redis | Cluster,
    private readonly connectTimeoutMs: number,
  ) {
    if (!(
      Number.isSafeInteger(connectTimeoutMs) &&
      connectTimeoutMs >= 0 &&
      connectTimeoutMs <= 2 ** 31 - 1
    )) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_STORE_OPTION',
        `invalid connectTimeoutMs ${quote(connectTimeoutMs)}: expected an integer number of ms from 0 to 2^31-1`,
        'RedisStore',
      );
    }
    this.connected = client.status === 'ready';
    if (!this.connected) client.once('ready', () => (this.connected = true));
  }

  /** Undefined when the client is ready; else when it will be, or why it will not. */
  check(): Promise<void> | undefined {
    const status = this.client.status;
    if (status === 'ready') return undefined;
    if (!this.connected && CONNECTING.has(status)) return (this.first ??= this.firstConnection());
    return Promise.reject(
      new RateLimitBackendError(
        'unavailable',
        `rate-limit store unreachable: not connected to Redis (client ${status})`,
      ),
    );
  }

  private firstConnection(): Promise<void> {
    const client = this.client;
    const waiting = new Promise<void>((resolve, reject) => {
      const done = (error?: Error): void => {
        clearTimeout(timer);
        client.off('ready', onReady);
        client.off('close', onClose);
        this.first = undefined;
        if (error) reject(error);
        else resolve();
      };
      const onReady = (): void => done();
      // The attempt failed (refused, closed by the server, the client closed): nothing to
      // wait for until ioredis tries again, and then it is no first connection in progress.
      const onClose = (): void =>
        done(
          new RateLimitBackendError(
            'unavailable',
            'rate-limit store unreachable: not connected to Redis (its first connection failed)',
          ),
        );
      const timer = setTimeout(
        () =>
          done(
            new RateLimitBackendError(
              'unavailable',
              `rate-limit store unreachable: Redis not connected within ${this.connectTimeoutMs} ms`,
            ),
          ),
        this.connectTimeoutMs,
      );
      // The client keeps the process alive while it connects, not this wait.
      timer.unref();
      client.once('ready', onReady);
      client.once('close', onClose);
    });
    // A lazy client connects on its first command; this call is that command.
    if (client.status === 'wait') client.connect().catch(() => undefined);
    return waiting;
  }
}
