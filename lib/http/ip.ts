import { isIP } from 'node:net';

/** The parts of an HTTP request that identify its client, on Express and Fastify alike. */
export interface RequestLike {
  /** The platform's client address (Express `trust proxy`, Fastify `trustProxy`). */
  ip?: string;
  socket?: { remoteAddress?: string };
  headers: Record<string, string | string[] | undefined>;
  /** Set by authentication (e.g. Passport). */
  user?: unknown;
  /** Fastify's underlying Node request, where Nest middleware sets `user` on Fastify. */
  raw?: { user?: unknown };
}

/** How to find the client address. */
export interface IpOptions {
  /**
   * Number of proxies in front of the app that append to `X-Forwarded-For`. With n, the
   * n-th address from the right is the client. Unset (default): the platform's
   * `request.ip`, so a client-sent `X-Forwarded-For` is never believed.
   */
  trustedProxies?: number;
  /** Prefix length that groups IPv6 clients (default 64: one budget per /64). */
  ipv6Subnet?: number;
}

/**
 * The client address, normalised: IPv4-mapped IPv6 becomes IPv4, and IPv6 is reduced to
 * its `/ipv6Subnet` network (`2001:db8:1:2::/64`), since one subscriber usually holds a
 * whole /64 and could otherwise rotate through it. `unknown` when there is none.
 */
export function clientIp(request: RequestLike, options: IpOptions = {}): string {
  const raw = options.trustedProxies ? forwardedFor(request, options.trustedProxies) : undefined;
  const address = raw ?? request.ip ?? request.socket?.remoteAddress;
  return (address && normalizeIp(address, options.ipv6Subnet ?? 64)) ?? 'unknown';
}

/**
 * The n-th address from the right of `X-Forwarded-For`; the left-most when there are
 * fewer (the request came through fewer proxies, and the left-most is the client as far
 * as they know); undefined when there is none.
 */
function forwardedFor(request: RequestLike, n: number): string | undefined {
  // Optional: a transport's request-like object may come without headers.
  const header = request.headers?.['x-forwarded-for'];
  const list = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return list[Math.max(0, list.length - n)];
}

/**
 * Normalises an address as described in {@link clientIp}, or undefined when it is not an
 * IP address. Parsing is left to the platform: `node:net` tells the family, and the WHATWG
 * URL parser writes IPv6 in its canonical form.
 */
export function normalizeIp(address: string, ipv6Subnet = 64): string | undefined {
  // Some proxies append a port: `203.0.113.7:5678`, `[2001:db8::1]:443`.
  const trimmed = address
    .trim()
    .replace(/^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/, '$1')
    .replace(/^\[(.*)\](?::\d+)?$/, '$1');
  const family = isIP(trimmed.replace(/%.*$/, ''));
  if (family === 4) return trimmed;
  if (family !== 6) return undefined;
  const groups = expand(new URL(`http://[${trimmed.replace(/%.*$/, '')}]/`).hostname.slice(1, -1));
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 255, groups[7]! >> 8, groups[7]! & 255].join('.');
  }
  if (ipv6Subnet >= 128) return groups.map((g) => g.toString(16)).join(':');
  const kept = Math.ceil(ipv6Subnet / 16);
  const masked = groups.slice(0, kept).map((g, i) => {
    const bits = Math.min(16, ipv6Subnet - i * 16);
    return (g & (0xffff << (16 - bits)) & 0xffff).toString(16);
  });
  return `${masked.join(':')}::/${ipv6Subnet}`;
}

/** Eight 16-bit groups from a canonical (compressed, hex) IPv6 address. */
function expand(canonical: string): number[] {
  const [head = '', tail] = canonical.split('::');
  const parse = (part: string) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}
