import { Inject, Injectable } from '@nestjs/common';
import type { ConsumeOptions, LimitEntry, Policies } from '../core/limiter.js';
import { RateLimiter } from '../core/limiter.js';
import type { Decision } from '../core/policy.js';

/**
 * The limiter for code that is not an HTTP route: jobs, webhooks, queue consumers.
 * Same store, prefix and failure settings as the guard.
 */
@Injectable()
export class RateLimitService {
  constructor(@Inject(RateLimiter) readonly limiter: RateLimiter) {}

  /** See {@link RateLimiter.consume}. */
  consume(identity: string, policies: Policies, options?: ConsumeOptions): Promise<Decision> {
    return this.limiter.consume(identity, policies, options);
  }

  /** See {@link RateLimiter.consumeEach}. */
  consumeEach(entries: readonly LimitEntry[], options?: ConsumeOptions): Promise<Decision> {
    return this.limiter.consumeEach(entries, options);
  }

  /** See {@link RateLimiter.peek}. */
  peek(
    identity: string,
    policies: Policies,
    options?: Omit<ConsumeOptions, 'cost'>,
  ): Promise<Decision> {
    return this.limiter.peek(identity, policies, options);
  }

  /** See {@link RateLimiter.reset}. */
  reset(identity: string, scope?: string): Promise<number> {
    return this.limiter.reset(identity, scope);
  }
}
