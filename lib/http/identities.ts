import { createHash } from 'node:crypto';
import { quote, RateLimitConfigError } from '../core/errors.js';
import { clientIp, normalizeIp, type IpOptions, type RequestLike } from './ip.js';

/**
 * Identity builders over a plain request (see docs/guides/identities-and-proxies.md); the Nest
 * `keys` wrap them.
 * Each returns undefined when the request does not carry what it keys on.
 */

/** `ip:<address>`, per {@link clientIp}. */
export function ipIdentity(request: RequestLike, options?: IpOptions): string {
  return `ip:${clientIp(request, options)}`;
}

/**
 * The identity as the guard writes it: an `ip:` identity with its address in the form
 * {@link clientIp} gives (`ip:2001:0db8::1` becomes `ip:2001:db8::/64`); any other, as it is.
 * For operators, who type an address as they found it.
 */
export function canonicalIdentity(identity: string, ipv6Subnet?: number): string {
  if (!identity.startsWith('ip:')) return identity;
  const address = normalizeIp(identity.slice(3), ipv6Subnet);
  return address === undefined ? identity : `ip:${address}`;
}

/** Reads a user id: `id`, else `sub` (JWT subject), else `userId`. */
function defaultUserId(user: unknown): unknown {
  if (user === null || typeof user !== 'object') return undefined;
  const u = user as Record<string, unknown>;
  return u.id ?? u.sub ?? u.userId;
}

/**
 * `user:<id>` of an authenticated user (on HTTP `request.user`, wherever the transport keeps
 * it), or undefined for an anonymous call. An id is a string, a number, a bigint, or an
 * object that spells itself (a MongoDB `ObjectId`, a UUID class: its own `toString`).
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_IDENTITY` for a user whose id is none of
 *   those (a plain object, a boolean): the key then falls back to the IP, logged as
 *   `rate_limit.config_error`, rather than silently
 */
export function userIdentity(
  user: unknown,
  select: (user: unknown) => unknown = defaultUserId,
): string | undefined {
  if (user === undefined || user === null) return undefined;
  const id = select(user);
  if (typeof id === 'string' || typeof id === 'number' || typeof id === 'bigint') {
    return `user:${id}`;
  }
  if (id === undefined || id === null) return undefined;
  const spelled = spelledId(id);
  if (spelled !== undefined) return `user:${spelled}`;
  throw new RateLimitConfigError(
    'ERR_RATE_LIMIT_IDENTITY',
    `the user's id is ${quote(id)}, which spells no identity: give keys.user a selector that returns a string`,
  );
}

/** An object id's own spelling (`toString` other than Object's), if it has one. */
function spelledId(id: unknown): string | undefined {
  if (typeof id !== 'object') return undefined;
  const toString = (id as { toString?: unknown }).toString;
  if (typeof toString !== 'function' || toString === Object.prototype.toString) return undefined;
  const spelled: unknown = toString.call(id);
  return typeof spelled === 'string' && spelled !== '' ? spelled : undefined;
}

/**
 * `hdr:<name>:<hash>` from a header's value, hashed (SHA-256, base64url, 22 characters)
 * so secrets such as API keys are never stored in clear. Undefined when absent or empty.
 */
export function headerIdentity(request: RequestLike, name: string): string | undefined {
  const raw = request.headers?.[name.toLowerCase()];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (!value) return undefined;
  return `hdr:${name.toLowerCase()}:${createHash('sha256').update(value).digest('base64url').slice(0, 22)}`;
}
