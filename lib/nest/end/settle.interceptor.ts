import {
  Injectable,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { Observable } from 'rxjs';
import { storedOutcome } from '../pipeline/outcome.js';
import { claimSlots, type SlotHold } from './slot-hold.js';
import { adapterOf } from '../transports/registry.js';
import { ownsResponse } from './response-owner.js';

/** The status a failed handler is counted with: an `HttpException`'s own, else 500. */
function statusOf(error: unknown): number {
  const status = (error as { getStatus?: () => unknown } | null)?.getStatus?.();
  return typeof status === 'number' ? status : 500;
}

/**
 * A body Nest sends after the handler has returned, as it is read: a `StreamableFile`, a
 * Node or web stream, an async iterable, a web `Response`. Duck-typed: a CommonJS and an ESM
 * copy of `@nestjs/common` each have their own `StreamableFile`.
 */
function streamedBody(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string | symbol, unknown>;
  if (typeof v.getStream === 'function' && typeof v.getHeaders === 'function') return true;
  if (typeof Response === 'function' && value instanceof Response) return true;
  return typeof v[Symbol.asyncIterator] === 'function' && typeof v.then !== 'function';
}

/**
 * Ends a guarded call with its handler. Concurrency slots: claimed when the
 * handler starts, given back when its result settles (its promise, or its observable
 * completes or errors), and that result passed on only once the release has reached the
 * store, so the response (or the exception filter's) is written after it; values pass at
 * once (Server-Sent Events stream as they come, their end waits for the release). On HTTP a
 * streamed body (`StreamableFile`, streams, async iterables), and the response of a handler
 * that writes it itself (`@Res()` without `passthrough`), keep them until the response ends.
 * An unsubscribe before the end (an SSE client that left, a stream cancelled, an app-wide
 * `timeout()` interceptor giving up) gives them back.
 * `count` policies where the transport has no response to watch (GraphQL, WebSocket,
 * microservices): settled with the result, success as status 200, a thrown error as its
 * `HttpException` status, else 500; HTTP settles from the response (`onSent`).
 *
 * Put on handlers by `@ConcurrencyLimit` and by `@RateLimit` with `count`, first among the
 * handler's (or class's) own interceptors, so that only they pay for an RxJS pipeline; under
 * the `overload` option, on every class of GraphQL, WebSocket or microservice handlers too.
 */
@Injectable()
export class RateLimitSettleInterceptor implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    const carrier = adapterOf(ctx)?.carrier(ctx);
    if (carrier === undefined) return next.handle();
    const http = ctx.getType() === 'http';
    const hold = claimSlots(carrier);
    const settle = http ? undefined : storedOutcome(carrier)?.settle;
    if (hold === undefined && settle === undefined) return next.handle();
    const handler = ctx.getHandler();
    return whileRunning(next.handle(), hold, settle, {
      http,
      ownsResponse: http && hold !== undefined && ownsResponse(ctx.getClass(), handler),
    });
  }
}

interface Running {
  http: boolean;
  /** The handler writes the response itself: the hold goes to the response's end. */
  ownsResponse: boolean;
}

/** `source`, with the hold given back and `settle` called as it ends (see above). */
function whileRunning(
  source: Observable<unknown>,
  hold: SlotHold | undefined,
  settle: ((status: number) => void) | undefined,
  { http, ownsResponse }: Running,
): Observable<unknown> {
  return new Observable((subscriber) => {
    let over = false;
    let streamed = false;
    const subscription = source.subscribe({
      next(value) {
        if (http && hold && streamedBody(value)) {
          streamed = true;
          hold.handOver();
        }
        subscriber.next(value);
      },
      error(error: unknown) {
        over = true;
        settle?.(statusOf(error));
        if (!hold) return subscriber.error(error);
        void hold.end().then(() => subscriber.error(error));
      },
      complete() {
        over = true;
        settle?.(200);
        if (!hold || streamed) return subscriber.complete();
        if (ownsResponse) {
          hold.handOver();
          return subscriber.complete();
        }
        void hold.end().then(() => subscriber.complete());
      },
    });
    return () => {
      subscription.unsubscribe();
      // Unsubscribed before the end (an SSE client that left, an app-wide timeout()):
      // nothing waits for the result. Known gap: a handler still running after a timeout()
      // gave up on it has its slot given back already.
      if (!over && !streamed) void hold?.end();
    };
  });
}
