import type { ExecutionContext } from '@nestjs/common';
import type { RateLimitEvents } from '../../observability/events.js';
import type { Transport } from '../../transports/transport.js';
import { NO_LIMIT, type RequestOutcome } from '../outcome.js';

/**
 * The deliver stage: the informational headers go out through the call's transport, then
 * a refusal is raised (`refuse`, the guard's extension point, which renders it through the
 * same transport). The headers go first, so that a `refuse` of your own keeps `Retry-After`
 * and the rate-limit headers; and on an admitted request, so that a 401 from a later guard
 * still carries them.
 * @throws the refusal, when the outcome refuses
 */
export function deliver(
  ctx: ExecutionContext,
  transport: Transport,
  outcome: RequestOutcome,
  events: RateLimitEvents,
  refuse: (ctx: ExecutionContext, outcome: RequestOutcome) => never,
): void {
  if (outcome === NO_LIMIT) return;
  try {
    transport.setHeaders(ctx, outcome.headers, outcome);
  } catch (error) {
    events.configError(`transport ${transport.type}`, error);
  }
  if (!outcome.allowed) refuse(ctx, outcome);
}
