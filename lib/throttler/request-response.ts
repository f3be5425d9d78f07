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

/** A throttler setting that is not a number (the throttler's own message). */
class ThrottlerSettingError extends Error {}

/**
 * A throttler setting as a number: a number (`Infinity` included), or a numeric string.
 * @throws {ThrottlerSettingError} naming the option, the throttler and the value, for
 *   anything else (`NaN`, `'abc'`, `undefined`, an object)
 */
export function toNumber(value: unknown, option: string, throttlerName: string): number {
  const number = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  if (typeof number !== 'number' || Number.isNaN(number)) {
    throw new ThrottlerSettingError(
      `Invalid "${option}" for the "${throttlerName}" throttler: expected a number, got ${JSON.stringify(value) ?? String(value)}.`,
    );
  }
  return number;
}

/**
 * A throttler setting, resolved for the request: a number, a numeric string, or a function of
 * the context giving one.
 * @throws {ThrottlerSettingError} naming the option and the throttler, for anything else
 */
export async function resolveNumber(
  context: ExecutionContext,
  value: Resolvable<number> | undefined,
  option: string,
  throttlerName: string,
): Promise<number> {
  const resolved: unknown = typeof value === 'function' ? await value(context) : value;
  return toNumber(resolved, option, throttlerName);
}
