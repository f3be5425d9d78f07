/**
 * The address the allow-list matches: `clientIp`'s trust rules, without `ipv6Subnet`
 * grouping; and the list itself, through Node's BlockList.
 */
import { describe, expect, it } from '@jest/globals';
import { AllowList } from '../../lib/http/allow-list.js';
import { clientAddress, clientIp, type RequestLike } from '../../lib/http/ip.js';

describe('clientAddress', () => {
  it('follows the rules of clientIp, but keeps an IPv6 address whole', () => {
    const request = {
      ip: '::ffff:10.0.0.1',
      headers: { 'x-forwarded-for': '6.6.6.6, 2001:DB8:1:2::5' },
    };
    expect(clientAddress(request)).toBe('10.0.0.1');
    expect(clientAddress(request, { trustedProxies: 1 })).toBe('2001:db8:1:2::5');
    expect(clientIp(request, { trustedProxies: 1 })).toBe('2001:db8:1:2::/64');
    expect(clientAddress(request, { trustedProxies: 1, ipv6Subnet: 32 })).toBe('2001:db8:1:2::5');
    expect(clientAddress(request, { trustedProxies: 2 })).toBe('6.6.6.6');
    expect(clientAddress({ headers: {}, socket: { remoteAddress: '[::1]:443' } })).toBe('::1');
  });

  it('falls back to the connection when the trusted entry is no address, and a range is none', () => {
    const behindProxy = (xff: string): RequestLike => ({
      ip: '198.51.100.9',
      socket: { remoteAddress: '::ffff:10.0.0.2' },
      headers: { 'x-forwarded-for': xff },
    });
    expect(clientAddress(behindProxy('unknown'), { trustedProxies: 1 })).toBe('10.0.0.2');
    // A client cannot claim a whole range as its address.
    expect(clientAddress(behindProxy('2001:db8::/32'), { trustedProxies: 1 })).toBe('10.0.0.2');
    expect(clientAddress({ headers: {} })).toBeUndefined();
  });
});

describe('AllowList', () => {
  const list = new AllowList(
    ['10.0.0.0/8', '2001:db8:abcd::/48', '192.0.2.7', '::ffff:198.51.100.0/120'],
    { trustedProxies: 1 },
    'test',
  );
  const from = (address: string): RequestLike => ({
    headers: { 'x-forwarded-for': address },
  });

  it.each([
    ['10.255.0.1', true],
    ['11.0.0.1', false],
    ['192.0.2.7', true],
    ['192.0.2.8', false],
    ['::ffff:10.1.1.1', true],
    ['2001:db8:abcd:ffff::1', true],
    ['2001:db8:abce::1', false],
    // An IPv4-mapped range holds the IPv4 clients it maps.
    ['198.51.100.200', true],
    ['198.51.101.1', false],
  ])('%s allowed: %s', (address, allowed) => {
    expect(list.allows(from(address))).toBe(allowed);
  });

  it('allows nothing without a request or an address', () => {
    expect(list.allows(undefined)).toBe(false);
    expect(list.allows({ headers: {} })).toBe(false);
  });
});
