import { createHash } from 'node:crypto';
import { clientIp, normalizeIp, type IpOptions, type RequestLike } from './ip.js';

/**
 * Identity builders over a plain request (DESIGN §5); the Nest `keys` wrap them.
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
export function defaultUserId(user: unknown): unknown {
  if (user === null || typeof user !== 'object') return undefined;
  const u = user as Record<string, unknown>;
  return u.id ?? u.sub ?? u.userId;
}

/**
 * `user:<id>` of an authenticated user (on HTTP `request.user`, wherever the transport keeps
 * it), or undefined for an anonymous call.
 */
export function userIdentity(
  user: unknown,
  select: (user: unknown) => unknown = defaultUserId,
): string | undefined {
  const id = user === undefined ? undefined : select(user);
  return typeof id === 'string' || typeof id === 'number' ? `user:${id}` : undefined;
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
