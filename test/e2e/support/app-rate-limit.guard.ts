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

  // Your own HTTP body; Retry-After and the rate-limit headers are already set. The guard
  // serves every transport: leave GraphQL, WebSocket and RPC refusals to the module.
  protected override refuse(ctx: ExecutionContext, outcome: RequestOutcome): never {
    if (ctx.getType() !== 'http') return super.refuse(ctx, outcome);
    const { status, retryAfter, exposeDetails } = outcome.refusal!;
    // exposeDetails: false (a login route) keeps the wait out of the body.
    const wait = exposeDetails && retryAfter !== undefined ? { retryAfter } : {};
    throw new HttpException({ error: 'slow_down', ...wait }, status);
  }
}
