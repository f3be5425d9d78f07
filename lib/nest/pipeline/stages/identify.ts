import type { ExecutionContext } from '@nestjs/common';
import { quote, RateLimitConfigError } from '../../../core/errors.js';
import { ipIdentity } from '../../../http/identities.js';
import type { IpOptions, RequestLike } from '../../../http/ip.js';
import type { RateLimitEvents } from '../../observability/events.js';
import type { KeyFn, KeyHelpers } from '../../declare/keys.js';
import { isThenable } from '../thenable.js';

/** The identity of a key function for the request at hand: a string when the key function is synchronous. */
export type IdentityOf = (key: KeyFn) => string | Promise<string>;

/** What a context without a request (RPC) identifies by: `ip:unknown`. */
const NO_REQUEST: RequestLike = { headers: {} };

/**
 * The identity of each key function, computed once per request; a key function that throws,
 * rejects or returns something other than a string or number is logged as
 * `rate_limit.config_error` and falls back to the client IP. Synchronous when the key
 * function is (the usual case), so a fixed route awaits nothing before the store call.
 *
 * @param request what the transport reads the client address from; undefined when it has none
 * @param route `Controller.handler`, for logs
 */
export function identitiesOf(
  ctx: ExecutionContext,
  request: RequestLike | undefined,
  route: string,
  ipOptions: IpOptions,
  events: RateLimitEvents,
): IdentityOf {
  let ip: string | undefined;
  const helpers: KeyHelpers = {
    ip: () => (ip ??= ipIdentity(request ?? NO_REQUEST, ipOptions)),
  };
  // Most routes have one key function: one remembered answer, and a Map only for more.
  let firstKey: KeyFn | undefined;
  let firstIdentity: string | Promise<string> | undefined;
  let more: Map<KeyFn, string | Promise<string>> | undefined;
  return (key: KeyFn): string | Promise<string> => {
    if (key === firstKey) return firstIdentity!;
    let identity = more?.get(key);
    if (identity === undefined) {
      try {
        const id: unknown = key(ctx, helpers);
        identity = isThenable(id)
          ? Promise.resolve(id)
              .then((answer) => accepted(answer, helpers, route))
              .catch((error: unknown) => fallback(error, helpers, route, events))
          : accepted(id, helpers, route);
      } catch (error) {
        identity = fallback(error, helpers, route, events);
      }
      if (firstKey === undefined) {
        firstKey = key;
        firstIdentity = identity;
      } else (more ??= new Map()).set(key, identity);
    }
    return identity;
  };
}

/** A key function's answer as an identity; nothing (undefined, '') means the client IP. */
function accepted(id: unknown, helpers: KeyHelpers, route: string): string {
  if (typeof id === 'string' && id !== '') return id;
  if (id === undefined || id === '') return helpers.ip();
  if (typeof id === 'number' && Number.isFinite(id)) return String(id);
  throw new RateLimitConfigError(
    'ERR_RATE_LIMIT_IDENTITY',
    `a key function returned ${quote(id)}`,
    route,
  );
}

/** A key function that failed: logged, and the client IP instead. */
function fallback(
  error: unknown,
  helpers: KeyHelpers,
  route: string,
  events: RateLimitEvents,
): string {
  events.configError(route, error);
  return helpers.ip();
}
