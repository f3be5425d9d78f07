import { Injectable, Optional, type OnApplicationShutdown } from '@nestjs/common';
import { RateLimiter } from '../core/limiter.js';
import { MemoryStore, type MemoryStoreOptions } from '../core/stores/memory/memory-store.js';
import { EngineStorage } from './engine-storage.js';

/**
 * How often, in **ms**, the in-memory storage drops windows that have ended (its store's
 * sweep; the throttler's storage swept every 60,000 ms).
 */
export const DEFAULT_SWEEP_INTERVAL = 1000;

/**
 * The default storage: counts in this process, on this package's {@link MemoryStore}.
 * Unlike the throttler's, it schedules no timer per hit (so no request's AsyncLocalStorage
 * context is kept alive by one, nestjs/throttler#2629): expired windows are dropped when read
 * and by one unreferenced sweep timer, made with the storage, never on a request; memory is
 * bounded by `maxKeys` (nestjs/throttler#2665): 200,000 budget keys (one per tracker, route
 * and throttler) by default, about 500 bytes of heap each, so about 100 MB at most (the
 * throttler's storage holds about 780 bytes per key, unbounded between its sweeps).
 */
@Injectable()
export class ThrottlerStorageService extends EngineStorage implements OnApplicationShutdown {
  /** The store this storage counts in (to read or reset state in tests). */
  readonly store: MemoryStore;
  private readonly engine: RateLimiter;

  /**
   * @param options the store's options (`maxKeys`, `sweepIntervalMs` in **ms**, ...): optional,
   *   so `providers: [ThrottlerStorageService]` builds it with none (nothing is injected)
   */
  constructor(@Optional() options: MemoryStoreOptions = {}) {
    super();
    this.store = new MemoryStore({ sweepIntervalMs: DEFAULT_SWEEP_INTERVAL, ...options });
    // In memory a call cannot time out or fail: no timeout, no circuit breaker.
    this.engine = new RateLimiter({
      store: this.store,
      prefix: 'throttler',
      timeoutMs: Infinity,
      circuitBreaker: false,
    });
  }

  protected limiter(): RateLimiter {
    return this.engine;
  }

  /** Stops the sweep timer and forgets every count. */
  onApplicationShutdown(): Promise<void> {
    return this.store.close();
  }
}
