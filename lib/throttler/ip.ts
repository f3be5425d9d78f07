import { normalizeIp as normalizeAddress } from '../http/ip.js';

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
