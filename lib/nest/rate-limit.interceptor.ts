import {
  Injectable,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import { outcomeOf, setHeaders } from './http-context.js';

/**
 * Writes the informational rate-limit headers (DESIGN §7) before the handler runs, so
 * they reach every response the handler produces. The guard writes them as well (a later
 * guard may refuse the request); writing them twice sets the same values.
 */
@Injectable()
export class RateLimitInterceptor implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (ctx.getType() === 'http') {
      const outcome = outcomeOf(ctx);
      if (outcome?.allowed) setHeaders(ctx, outcome.headers);
    }
    return next.handle();
  }
}
