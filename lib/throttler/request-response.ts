import type { ExecutionContext } from '@nestjs/common';
import type { Resolvable, ThrottlerRecord } from './options.js';

/**
 * The request and response of a context: HTTP's; GraphQL's from its context object (the
 * third resolver argument: `req`/`res`, Fastify's `request`/`reply`, or the request's own
 * `res`). Never throws; either may be undefined.
 */
export function requestResponseOf(context: ExecutionContext): {
  req: ThrottlerRecord;
  res: ThrottlerRecord;
} {
  if ((context.getType() as string) === 'graphql') {
    const gql = context.getArgByIndex<ThrottlerRecord | undefined>(2);
    const req = (gql?.req ?? gql?.request) as ThrottlerRecord;
    const res = (gql?.res ?? gql?.reply ?? req?.res) as ThrottlerRecord;
    return { req, res };
  }
  const http = context.switchToHttp();
  return { req: http.getRequest(), res: http.getResponse() };
}

/** Whether the request's `User-Agent` matches one of `patterns`. */
export function userAgentIgnored(
  patterns: RegExp[] | undefined,
  req: ThrottlerRecord | undefined,
): boolean {
  const agent = (req?.headers as Record<string, unknown> | undefined)?.['user-agent'];
  return Array.isArray(patterns) && patterns.some((pattern) => pattern.test(agent as string));
}

/**
 * A throttler setting, resolved for the request: a number, a numeric string, or a function of
 * the context giving one.
 * @throws {Error} naming the option and the throttler, for anything else
 */
export async function resolveNumber(
  context: ExecutionContext,
  value: Resolvable<number> | undefined,
  option: string,
  throttlerName: string,
): Promise<number> {
  const resolved: unknown = typeof value === 'function' ? await value(context) : value;
  const number =
    typeof resolved === 'string' && resolved.trim() !== '' ? Number(resolved) : resolved;
  if (typeof number !== 'number' || Number.isNaN(number)) {
    throw new Error(
      `Invalid "${option}" for the "${throttlerName}" throttler: expected a number, got ${JSON.stringify(resolved)}.`,
    );
  }
  return number;
}
