/**
 * The README's "Your own guard" example, word for word (test/e2e/extension.test.ts checks it);
 * only the import path of the package differs.
 */
import { HttpException, Injectable, type ExecutionContext } from '@nestjs/common';
import { RateLimitGuard, rateLimitContext, type RequestOutcome } from '../../../lib/index.js';

@Injectable()
export class AppRateLimitGuard extends RateLimitGuard {
  // Partners with an allow-listed key are not limited.
  protected override shouldSkip(ctx: ExecutionContext): boolean {
    return rateLimitContext(ctx).request?.headers['x-partner-key'] === 'partner-1';
  }

  // Your own body; Retry-After and the rate-limit headers are already set.
  protected override refuse(_ctx: ExecutionContext, outcome: RequestOutcome): never {
    const retryAfter = Number(outcome.headers['Retry-After'] ?? 1);
    throw new HttpException({ error: 'slow_down', retryAfter }, outcome.refusal!.status);
  }
}
