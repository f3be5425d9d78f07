import {
  Injectable,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { finalize, tap, type Observable } from 'rxjs';
import { storedOutcome } from './outcome.js';
import { adapterOf } from '../transports/registry.js';

/** The status a failed handler is counted with: an `HttpException`'s own, else 500. */
function statusOf(error: unknown): number {
  const status = (error as { getStatus?: () => unknown } | null)?.getStatus?.();
  return typeof status === 'number' ? status : 500;
}

/**
 * Ends a guarded call where the transport has no response to watch (GraphQL, WebSocket,
 * microservices): once the handler's result settles (its promise, or its observable
 * completes or errors), gives back its concurrency slots and settles `count` policies
 * (success as status 200, a thrown error as its `HttpException` status, else 500).
 * HTTP is left to the transport (`onDone`, `onSent`: the response itself, dropped
 * connections included), so there it passes the call through untouched.
 *
 * Put on handlers by `@ConcurrencyLimit` and by `@RateLimit` with `count`, so that only
 * they pay for an RxJS pipeline.
 */
@Injectable()
export class RateLimitSettleInterceptor implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (ctx.getType() === 'http') return next.handle();
    const carrier = adapterOf(ctx)?.carrier(ctx);
    const outcome = carrier === undefined ? undefined : storedOutcome(carrier);
    if (outcome?.release === undefined && outcome?.settle === undefined) return next.handle();
    const { release, settle } = outcome;
    let settled = false;
    const done = (status: number) => {
      if (settled) return;
      settled = true;
      settle?.(status);
    };
    return next.handle().pipe(
      tap({ complete: () => done(200), error: (error: unknown) => done(statusOf(error)) }),
      finalize(() => release?.()),
    );
  }
}
