import { normalizeIp as normalizeAddress } from '../http/ip.js';
import type { AddressOf, NodeRequest } from './platform-address.js';

/** The IPv6 prefix length, in bits, that one client's addresses share by default. */
export const DEFAULT_IPV6_SUBNET_PREFIX = 64;

/**
 * The default tracker of an address, as the throttler 6.7 computes it: IPv4 as written, an
 * IPv6 address that embeds an IPv4 client as that IPv4 address, the loopback `::1` as is,
 * any other IPv6 address as its `/ipv6SubnetPrefix` network (`2001:db8:1:2::/64`), so that
 * one client cannot take a fresh budget per address of its subnet. Anything that is not an
 * address is returned unchanged. Unlike the throttler's, NAT64 addresses
 * (`64:ff9b::a.b.c.d`) also count as their IPv4 client.
 */
export function normalizeIp(
  ip: string,
  ipv6SubnetPrefix: number = DEFAULT_IPV6_SUBNET_PREFIX,
): string {
  if (typeof ip !== 'string' || ip.length === 0) return ip;
  const whole = normalizeAddress(ip, 128);
  if (whole === undefined) return ip;
  if (whole === '::1' || !whole.includes(':')) return whole;
  const prefix = Number.isFinite(ipv6SubnetPrefix)
    ? Math.min(Math.max(Math.trunc(ipv6SubnetPrefix), 0), 128)
    : DEFAULT_IPV6_SUBNET_PREFIX;
  if (prefix === 128) return `${whole}/128`;
  return normalizeAddress(whole, prefix) ?? ip;
}

type Obj = Record<string, unknown>;

const isObject = (value: unknown): value is Obj => typeof value === 'object' && value !== null;

/** A tracker of its own per WebSocket connection whose address is unknown. */
const connections = new WeakMap<object, string>();
let connectionCount = 0;

/**
 * The default tracker of a request (`req`, as `getRequestResponse` gives it), **as a string
 * or undefined**: its `ip` normalised (see {@link normalizeIp}), as the throttler does. Where
 * there is no `ip`, the client address of the Node request behind it: a graphql-ws context's
 * upgrade request (`req.extra.request` of Nest's GraphQL context for a subscription) or a raw
 * Node request (a Mercurius subscription's). That address is `addressOf`'s, the app's platform
 * reading it as for an HTTP request (its proxy trust; see `platformAddress`), else the socket's
 * peer address (also when `addressOf` throws or finds none). A graphql-ws connection without
 * any address is its own client (`ws-connection:<n>`), never pooled with every other one.
 * Anything else without an address gives what the throttler gives (`undefined`).
 */
export function trackerOf(req: unknown, ipv6SubnetPrefix: number, addressOf?: AddressOf): string {
  if (!isObject(req)) return normalizeIp(undefined as never, ipv6SubnetPrefix);
  if (typeof req.ip === 'string') return normalizeIp(req.ip, ipv6SubnetPrefix);
  const extra = isObject(req.extra) ? req.extra : undefined;
  const request = extra && isObject(extra.request) ? extra.request : req;
  const address = clientAddress(request, addressOf);
  if (address !== undefined) return normalizeIp(address, ipv6SubnetPrefix);
  // No address (a Unix socket, a connection already closed): one tracker per connection. A
  // client gains a fresh budget only by opening a new connection, which costs it a handshake.
  const connection = extra && isObject(extra.socket) ? extra.socket : undefined;
  if (connection === undefined) return normalizeIp(req.ip as string, ipv6SubnetPrefix);
  let tracker = connections.get(connection);
  if (tracker === undefined)
    connections.set(connection, (tracker = `ws-connection:${++connectionCount}`));
  return tracker;
}

/** The platform's address of a Node request, else its socket's peer address; never empty. */
function clientAddress(request: Obj, addressOf: AddressOf | undefined): string | undefined {
  const socket = isObject(request.socket) ? request.socket : undefined;
  if (socket === undefined) return undefined;
  if (addressOf !== undefined && isObject(request.headers)) {
    try {
      const address = addressOf(request as unknown as NodeRequest);
      if (typeof address === 'string' && address !== '') return address;
    } catch {
      // A header the platform's parser rejects: the socket's address, never a fresh budget.
    }
  }
  const address = socket.remoteAddress;
  return typeof address === 'string' && address !== '' ? address : undefined;
}
