import type { ExecutionContext } from '@nestjs/common';
import type { RequestOutcome } from './runtime.js';

const OUTCOME = Symbol('nest-rate-limit:outcome');

type Carrier = { [OUTCOME]?: RequestOutcome };

/** The outcome the guard stored on this request, if it ran. */
export function outcomeOf(ctx: ExecutionContext): RequestOutcome | undefined {
  return ctx.switchToHttp().getRequest<Carrier>()[OUTCOME];
}

/** Stores the outcome on the request itself, so nothing outlives the request. */
export function storeOutcome(ctx: ExecutionContext, outcome: RequestOutcome): void {
  ctx.switchToHttp().getRequest<Carrier>()[OUTCOME] = outcome;
}

/** Sets headers on an Express response or a Fastify reply. */
export function setHeaders(ctx: ExecutionContext, headers: Record<string, string>): void {
  const response = ctx.switchToHttp().getResponse<{
    setHeader?: (name: string, value: string) => void;
    header?: (name: string, value: string) => void;
    raw?: unknown;
  }>();
  // Fastify's reply has `header` and a `raw` Node response; Express's has `setHeader`.
  const fastify = response.raw !== undefined && typeof response.header === 'function';
  for (const name in headers) {
    if (fastify) response.header!(name, headers[name]!);
    else response.setHeader?.(name, headers[name]!);
  }
}
