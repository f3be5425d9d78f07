/**
 * Who a request counts against (DESIGN §5): users behind one address, spoofed forwarding
 * headers, `trustedProxies`, IPv6 grouping, and hashed API keys (issue 3, acceptance point 4).
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { keys, RateLimit, RateLimitService } from '../../lib/index.js';
import { clientIp, normalizeIp } from '../../lib/http/ip.js';
import { disconnect, newRedis } from '../harness/redis.js';
import { createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

@Controller('keys')
class KeysController {
  @Get('users')
  @RateLimit('2/m')
  users() {
    return 'ok';
  }

  @Get('spoof-xff')
  @RateLimit('2/m')
  spoofXff() {
    return 'ok';
  }

  @Get('spoof-real-ip')
  @RateLimit('2/m')
  spoofRealIp() {
    return 'ok';
  }

  @Get('spoof-forwarded')
  @RateLimit('2/m')
  spoofForwarded() {
    return 'ok';
  }

  @Get('spoof-all')
  @RateLimit('2/m')
  spoofAll() {
    return 'ok';
  }

  @Get('api')
  @RateLimit('2/m', { key: keys.header('x-api-key') })
  api() {
    return 'ok';
  }
}

@Controller('proxied')
class ProxiedController {
  @Get('right-most')
  @RateLimit('2/m')
  rightMost() {
    return 'ok';
  }

  @Get('v6')
  @RateLimit('2/m')
  v6() {
    return 'ok';
  }
}

const codes = (replies: { status: number }[]) => replies.map((r) => r.status);

/** Every key under `prefix` in Redis. */
async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found.sort();
}

let redis: Redis;
beforeAll(() => {
  redis = newRedis();
});
afterAll(() => disconnect(redis));

describe.each(PLATFORMS)('keys on %s', (platform) => {
  describe('default key (userOrIp), no trusted proxy', () => {
    let h: AppHandle;
    beforeAll(async () => {
      h = await createApp(platform, {}, [KeysController], { userFromHeader: true });
    });
    afterAll(() => h?.close());

    it('two users behind one IP get separate budgets', async () => {
      const alice = await times(3, () => h.get('/keys/users', { 'x-user': 'alice' }));
      const bob = await times(3, () => h.get('/keys/users', { 'x-user': 'bob' }));
      expect(codes(alice)).toEqual([200, 200, 429]);
      expect(codes(bob)).toEqual([200, 200, 429]);
      const stored = await keysUnder(redis, h.prefix);
      expect(stored.filter((k) => k.includes('KeysController.users'))).toEqual([
        expect.stringMatching(new RegExp(`^${h.prefix}:\\{user:alice\\}:KeysController\\.users::`)),
        expect.stringMatching(new RegExp(`^${h.prefix}:\\{user:bob\\}:KeysController\\.users::`)),
      ]);
    });

    it.each([
      [
        'X-Forwarded-For',
        'spoof-xff',
        'spoofXff',
        (i: number) => ({ 'x-forwarded-for': `203.0.113.${i}` }),
      ],
      [
        'X-Real-IP',
        'spoof-real-ip',
        'spoofRealIp',
        (i: number) => ({ 'x-real-ip': `203.0.113.${i}` }),
      ],
      [
        'Forwarded',
        'spoof-forwarded',
        'spoofForwarded',
        (i: number) => ({ forwarded: `for=203.0.113.${i}` }),
      ],
      [
        'all three at once',
        'spoof-all',
        'spoofAll',
        (i: number) => ({
          'x-forwarded-for': `198.51.100.${i}, 203.0.113.${i}`,
          'x-real-ip': `192.0.2.${i}`,
          forwarded: `for="[2001:db8::${i}]";proto=http`,
        }),
      ],
    ])(
      'an anonymous client rotating %s gets no fresh bucket',
      async (_label, route, handler, spoof) => {
        let i = 0;
        const replies = await times(4, () => h.get(`/keys/${route}`, spoof(++i)));
        expect(codes(replies)).toEqual([200, 200, 429, 429]);
        // One bucket, keyed on the socket address.
        const stored = await keysUnder(redis, h.prefix);
        expect(stored.filter((k) => k.includes(`:KeysController.${handler}:`))).toEqual([
          expect.stringMatching(
            new RegExp(`^${h.prefix}:\\{ip:127\\.0\\.0\\.1\\}:KeysController\\.${handler}::`),
          ),
        ]);
      },
    );

    it("keys.header('x-api-key') limits per API key and stores no raw key in Redis", async () => {
      const secretA = `sk_live_${'A'.repeat(24)}`;
      const secretB = `sk_live_${'B'.repeat(24)}`;
      const a = await times(3, () => h.get('/keys/api', { 'x-api-key': secretA }));
      const b = await times(1, () => h.get('/keys/api', { 'x-api-key': secretB }));
      expect(codes(a)).toEqual([200, 200, 429]);
      expect(codes(b)).toEqual([200]);
      const stored = await keysUnder(redis, h.prefix);
      const apiKeys = stored.filter((k) => k.includes('KeysController.api'));
      expect(apiKeys).toHaveLength(2);
      for (const key of apiKeys) {
        expect(key).toMatch(
          new RegExp(`^${h.prefix}:\\{hdr:x-api-key:[A-Za-z0-9_-]{22}\\}:KeysController\\.api::`),
        );
      }
      for (const key of stored) {
        expect(key).not.toContain(secretA);
        expect(key).not.toContain(secretB);
        expect(key).not.toContain('sk_live');
      }
    });
  });

  describe('trustedProxies: 1', () => {
    let h: AppHandle;
    beforeAll(async () => {
      h = await createApp(platform, { trustedProxies: 1 }, [ProxiedController]);
    });
    afterAll(() => h?.close());

    it('uses the right-most X-Forwarded-For address and ignores the left-most', async () => {
      const viaProxy = (client: string, spoofed: string) => ({
        'x-forwarded-for': `${spoofed}, ${client}`,
      });
      const replies = [
        await h.get('/proxied/right-most', viaProxy('198.51.100.7', '1.1.1.1')),
        await h.get('/proxied/right-most', viaProxy('198.51.100.7', '2.2.2.2')),
        await h.get('/proxied/right-most', viaProxy('198.51.100.7', '3.3.3.3')),
        // Another client behind the proxy: a budget of its own.
        await h.get('/proxied/right-most', viaProxy('198.51.100.8', '1.1.1.1')),
      ];
      expect(codes(replies)).toEqual([200, 200, 429, 200]);
      const stored = (await keysUnder(redis, h.prefix)).filter((k) => k.includes('rightMost'));
      expect(stored).toEqual([
        expect.stringMatching(new RegExp(`^${h.prefix}:\\{ip:198\\.51\\.100\\.7\\}:`)),
        expect.stringMatching(new RegExp(`^${h.prefix}:\\{ip:198\\.51\\.100\\.8\\}:`)),
      ]);
    });

    it('IPv6 clients in one /64 share a budget; another /64 has its own', async () => {
      const from = (address: string) => ({ 'x-forwarded-for': address });
      const replies = [
        await h.get('/proxied/v6', from('2001:db8:1:2::1')),
        await h.get('/proxied/v6', from('2001:db8:1:2:ffff:ffff:ffff:fffe')),
        await h.get('/proxied/v6', from('2001:db8:1:2:abcd::9')),
        await h.get('/proxied/v6', from('2001:db8:1:3::1')),
        await h.get('/proxied/v6', from('::ffff:192.0.2.9')),
      ];
      expect(codes(replies)).toEqual([200, 200, 429, 200, 200]);
      const stored = (await keysUnder(redis, h.prefix)).filter((k) => k.includes('.v6:'));
      expect(stored).toEqual([
        expect.stringMatching(new RegExp(`^${h.prefix}:\\{ip:192\\.0\\.2\\.9\\}:`)),
        expect.stringMatching(new RegExp(`^${h.prefix}:\\{ip:2001:db8:1:2::/64\\}:`)),
        expect.stringMatching(new RegExp(`^${h.prefix}:\\{ip:2001:db8:1:3::/64\\}:`)),
      ]);
    });

    // Regression: `2001:db8::1` was stored as `ip:2001:db8:0:0::/64`, so no spelling an
    // operator would type found its keys.
    it.each(['ip:2001:db8::1', 'ip:2001:0db8:0:0::1', 'ip:2001:db8::/64'])(
      'reset(%p) clears the keys of the client at 2001:db8::1',
      async (spelling) => {
        const from = { 'x-forwarded-for': '2001:db8::1' };
        const before = await times(3, () => h.get('/proxied/v6', from));
        expect(codes(before)).toEqual(
          spelling === 'ip:2001:db8::1' ? [200, 200, 429] : [429, 429, 429],
        );
        const mine = async () =>
          (await keysUnder(redis, h.prefix)).filter((k) => k.includes('{ip:2001:db8::/64}'));
        expect(await mine()).toHaveLength(1);
        expect(await h.app.get(RateLimitService).reset(spelling)).toBe(1);
        expect(await mine()).toEqual([]);
        const after = await times(3, () => h.get('/proxied/v6', from));
        expect(codes(after)).toEqual([200, 200, 429]);
      },
    );
  });
});

describe('normalizeIp / clientIp', () => {
  it('maps addresses of one /64 to one value, and other /64s to others', () => {
    const subnet = normalizeIp('2001:db8:1:2::1');
    expect(subnet).toBe('2001:db8:1:2::/64');
    expect(normalizeIp('2001:0db8:0001:0002:ffff:ffff:ffff:ffff')).toBe(subnet);
    expect(normalizeIp('2001:DB8:1:2:a:b:c:d')).toBe(subnet);
    expect(normalizeIp('[2001:db8:1:2::7]')).toBe(subnet);
    expect(normalizeIp('fe80::1%eth0')).toBe('fe80::/64');
    expect(normalizeIp('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(normalizeIp('2001:db8:1:2::1', 48)).toBe('2001:db8:1::/48');
    expect(normalizeIp('2001:db8:1:2::1', 128)).toBe('2001:db8:1:2::1');
  });

  // Regression (issue 22, finding 9): NAT64 and IPv4-compatible addresses of distinct IPv4
  // clients were grouped into one /64, so they shared one budget.
  it('maps an IPv6 address that embeds one IPv4 client (mapped, NAT64, compatible) to that IPv4', () => {
    expect(normalizeIp('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(normalizeIp('64:ff9b::203.0.113.7')).toBe('203.0.113.7');
    expect(normalizeIp('64:ff9b::cb00:7108')).toBe('203.0.113.8');
    expect(normalizeIp('64:ff9b::198.51.100.1')).toBe('198.51.100.1');
    expect(normalizeIp('::203.0.113.9')).toBe('203.0.113.9');
    // Not an embedded address: loopback, the unspecified address, another /96.
    expect(normalizeIp('::1')).toBe('::/64');
    expect(normalizeIp('::')).toBe('::/64');
    expect(normalizeIp('64:ff9b:1::203.0.113.7')).toBe('64:ff9b:1::/64');
    expect(clientIp({ ip: '64:ff9b::203.0.113.10', headers: {} })).toBe('203.0.113.10');
  });

  // Regression (issue 22, finding 5): the memo kept every raw address it was asked, so 4,000
  // forwarded headers of 15 KB each held about 61 MB.
  it('normalizes a long value without remembering it', () => {
    const long = `${'x'.repeat(15_000)}`;
    expect(normalizeIp(long)).toBeUndefined();
    expect(normalizeIp(`2001:db8::1%${'e'.repeat(100)}`)).toBe('2001:db8::/64');
  });

  // Regression: `2001:db8::1` was stored as `ip:2001:db8:0:0::/64`, so an operator's
  // reset('ip:2001:db8::/64') found nothing.
  it('writes every spelling of an IPv6 address in the canonical compressed form (RFC 5952)', () => {
    for (const spelling of [
      '2001:db8::1',
      '2001:0db8:0:0::1',
      '2001:DB8:0000:0000:0000:0000:0000:0001',
      '2001:db8::/64',
      '[2001:db8::1]:443',
    ]) {
      expect([spelling, normalizeIp(spelling)]).toEqual([spelling, '2001:db8::/64']);
    }
    expect(normalizeIp('::1')).toBe('::/64');
    expect(normalizeIp('2001:db8::/64', 128)).toBe('2001:db8::');
    expect(normalizeIp('1.2.3.4/8')).toBeUndefined();
  });

  it('turns IPv4-mapped IPv6 into IPv4', () => {
    expect(normalizeIp('::ffff:1.2.3.4')).toBe('1.2.3.4');
    expect(normalizeIp('::FFFF:102:304')).toBe('1.2.3.4');
    expect(normalizeIp('1.2.3.4')).toBe('1.2.3.4');
    expect(normalizeIp('not an address')).toBeUndefined();
  });

  it('clientIp believes X-Forwarded-For only with trustedProxies', () => {
    const request = {
      ip: '::ffff:10.0.0.1',
      headers: { 'x-forwarded-for': '6.6.6.6, 2001:db8:1:2::5' },
    };
    expect(clientIp(request)).toBe('10.0.0.1');
    expect(clientIp(request, { trustedProxies: 1 })).toBe('2001:db8:1:2::/64');
    expect(clientIp(request, { trustedProxies: 2 })).toBe('6.6.6.6');
    // Fewer addresses than proxies: the left-most, the client as far as the proxies know
    // (the platform's address would be a proxy, shared by every client behind it).
    expect(clientIp(request, { trustedProxies: 3 })).toBe('6.6.6.6');
    expect(clientIp({ headers: {}, socket: { remoteAddress: '::ffff:1.2.3.4' } })).toBe('1.2.3.4');
    expect(clientIp({ headers: {} })).toBe('unknown');
  });

  // Regression: with trustedProxies, `X-Forwarded-For: unknown` became `ip:unknown`, one
  // bucket shared by every such client.
  it('clientIp falls back to the connection address when the trusted entry is no address', () => {
    const behindProxy = (xff: string) => ({
      ip: '198.51.100.9',
      socket: { remoteAddress: '::ffff:10.0.0.2' },
      headers: { 'x-forwarded-for': xff },
    });
    expect(clientIp(behindProxy('unknown'), { trustedProxies: 1 })).toBe('10.0.0.2');
    expect(clientIp(behindProxy('6.6.6.6, _hidden'), { trustedProxies: 1 })).toBe('10.0.0.2');
    expect(clientIp(behindProxy('unknown, 1.2.3.4'), { trustedProxies: 2 })).toBe('10.0.0.2');
    expect(clientIp(behindProxy('unknown, 1.2.3.4'), { trustedProxies: 1 })).toBe('1.2.3.4');
    expect(clientIp({ headers: { 'x-forwarded-for': 'unknown' } }, { trustedProxies: 1 })).toBe(
      'unknown',
    );
  });
});
