import {
  Injectable,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import { storedOutcome } from './outcome.js';
import { adapterOf } from '../transports/registry.js';

/**
 * Writes the informational rate-limit headers (see docs/reference/http-contract.md) again
 * before the handler runs.
 * Not needed: {@link RateLimitGuard} writes them before any later guard or the handler,
 * and the module no longer registers this globally (it cost an RxJS pipeline per
 * request). Kept for applications that list it in `@UseInterceptors`; it does no harm.
 */
@Injectable()
export class RateLimitInterceptor implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    const transport = adapterOf(ctx);
    const carrier = transport?.carrier(ctx);
    if (carrier !== undefined) {
      const outcome = storedOutcome(carrier);
      if (outcome?.allowed) transport!.setHeaders(ctx, outcome.headers, outcome);
    }
    return next.handle();
  }
}
