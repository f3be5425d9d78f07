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
 * The client address, normalised: IPv6 that embeds one IPv4 client (mapped, NAT64) becomes that IPv4, other IPv6 is reduced to
 * its `/ipv6Subnet` network in canonical form (`2001:db8:1:2::/64`, RFC 5952), since one
 * subscriber usually holds a whole /64 and could otherwise rotate through it. With
 * `trustedProxies`, a forwarded entry that is not an address (`unknown`, a typo, a hostname)
 * is not believed: the connection's own address applies, as without the header. `unknown`
 * when there is no address at all.
 */
export function clientIp(request: RequestLike, options: IpOptions = {}): string {
  return (
    pickAddress(request, options.trustedProxies, normalizeIp, options.ipv6Subnet ?? 64) ?? 'unknown'
  );
}

/**
 * The client address by the rules of {@link clientIp} (`trustedProxies`, IPv4-mapped IPv6 to
 * IPv4), but whole: IPv6 in canonical form without grouping by `ipv6Subnet`, for matching
 * against ranges (the allow-list). Undefined when there is no address.
 */
export function clientAddress(request: RequestLike, options: IpOptions = {}): string | undefined {
  return pickAddress(request, options.trustedProxies, exactIp, undefined);
}

/**
 * The trust rules, once for {@link clientIp} and {@link clientAddress}: `parse` normalises an
 * address (undefined when it is none); module functions rather than closures, since this runs
 * on every request.
 */
function pickAddress<T>(
  request: RequestLike,
  trustedProxies: number | undefined,
  parse: (address: string, arg: T) => string | undefined,
  arg: T,
): string | undefined {
  if (trustedProxies) {
    const forwarded = forwardedFor(request, trustedProxies);
    const address = forwarded === undefined ? undefined : parse(forwarded, arg);
    if (address !== undefined) return address;
    // The proxy sent something that is no address: the peer of this connection is the
    // best we know. Not `request.ip`, which an app trusting every proxy reads from the
    // same untrusted header.
    const peer = request.socket?.remoteAddress ?? request.ip;
    return peer ? parse(peer, arg) : undefined;
  }
  const address = request.ip ?? request.socket?.remoteAddress;
  return address ? parse(address, arg) : undefined;
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
 * IP address. Any spelling of one address gives one string (`2001:0DB8:0::1` and
 * `2001:db8::1` alike): IPv6 in the canonical compressed form of RFC 5952, which the WHATWG
 * URL parser writes. An address written with a prefix (`2001:db8::/64`, as keys and
 * `inspect` show it) is accepted too and reduced to `ipv6Subnet` like any other, so an
 * operator can pass back what they were shown.
 */
export function normalizeIp(address: string, ipv6Subnet = 64): string | undefined {
  // The usual case, on every request: a plain IPv4 address, nothing to trim or reduce.
  if (isIP(address) === 4) return address;
  if (address.length > MEMO_KEY_LENGTH) return normalize(address, ipv6Subnet);
  const key = `${ipv6Subnet}/${address}`;
  let normalized = normalized6.get(key);
  if (normalized === undefined && !normalized6.has(key)) {
    normalized = normalize(address, ipv6Subnet);
    // A bounded memo of the last addresses seen: the URL parser behind `canonical` costs
    // microseconds, and a client sends many requests. Emptied when full, never grown.
    if (normalized6.size >= MEMO_SIZE) normalized6.clear();
    normalized6.set(key, normalized);
  }
  return normalized;
}

const MEMO_SIZE = 4096;
/**
 * Longer values are normalized but not remembered: an address with a zone and a port is far
 * shorter, and a header of kilobytes must not stay in memory (4,096 of them would hold
 * megabytes).
 */
const MEMO_KEY_LENGTH = 64;
const normalized6 = new Map<string, string | undefined>();

function normalize(address: string, ipv6Subnet: number): string | undefined {
  // Some proxies append a port: `203.0.113.7:5678`, `[2001:db8::1]:443`.
  const trimmed = address
    .trim()
    .replace(/^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/, '$1')
    .replace(/^\[(.*)\](?::\d+)?$/, '$1');
  const prefix = /^(.*)\/(\d{1,3})$/.exec(trimmed);
  const bare = (prefix ? prefix[1]! : trimmed).replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4 && !prefix) return bare;
  if (family !== 6) return undefined;
  const groups = expand(canonical(bare));
  if (!prefix && embedsIpv4(groups)) {
    return [groups[6]! >> 8, groups[6]! & 255, groups[7]! >> 8, groups[7]! & 255].join('.');
  }
  const bits = ipv6Subnet;
  if (bits >= 128) return canonical(bare);
  const masked = groups.map((g, i) => {
    const kept = Math.max(0, Math.min(16, bits - i * 16));
    return g & (0xffff << (16 - kept)) & 0xffff;
  });
  return `${canonical(masked.map((g) => g.toString(16)).join(':'))}/${bits}`;
}

/**
 * One address, whole: IPv4 as written, IPv6 that embeds one IPv4 client as IPv4, other IPv6 in canonical
 * form (RFC 5952); a port or zone is dropped. Undefined for anything else, a range included.
 */
function exactIp(address: string): string | undefined {
  const normalized = normalizeIp(address, 128);
  // With 128 bits, normalizeIp still accepts a range (`2001:db8::/64`): an address has none.
  return normalized === undefined || address.includes('/') ? undefined : normalized;
}

/**
 * Whether an IPv6 address stands for one IPv4 client, in its last 32 bits: IPv4-mapped
 * (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2), NAT64's well-known prefix (`64:ff9b::a.b.c.d`,
 * RFC 6052 §2.1) or IPv4-compatible (`::a.b.c.d`, deprecated; not `::1` or `::`). Such a
 * client gets its IPv4 address's budget, not a /64 shared with every other IPv4 client.
 */
function embedsIpv4(groups: readonly number[]): boolean {
  const zeros = (from: number, to: number) => groups.slice(from, to).every((g) => g === 0);
  if (zeros(0, 5) && groups[5] === 0xffff) return true;
  if (groups[0] === 0x64 && groups[1] === 0xff9b && zeros(2, 6)) return true;
  return zeros(0, 6) && groups[6] !== 0;
}

/** RFC 5952 text of an IPv6 address (lower case, longest zero run as `::`). */
function canonical(ipv6: string): string {
  return new URL(`http://[${ipv6}]/`).hostname.slice(1, -1);
}

/** Eight 16-bit groups from a canonical (compressed, hex) IPv6 address. */
function expand(compressed: string): number[] {
  const [head = '', tail] = compressed.split('::');
  const parse = (part: string) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}
