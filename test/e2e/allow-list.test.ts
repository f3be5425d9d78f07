/**
 * The allow-list (issue 13, item 6): addresses and CIDR ranges, v4 and v6, never limited,
 * matched against the client address the module's own rules find (`trustedProxies`,
 * IPv4-mapped IPv6), so a spoofed left-most `X-Forwarded-For` entry gets no one exempted.
 * The README recipe runs as written, on Express and Fastify.
 */
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { keys, RateLimit, RateLimitConfigError } from '../../lib/index.js';
import { createResources } from '../../lib/nest/module/resources.js';
import { createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

const readme = readFileSync(
  new URL('../../docs/guides/identities-and-proxies.md', import.meta.url),
  'utf8',
);

/** The recipe's option, as the README writes it. */
const RECIPE = "allowList: ['203.0.113.0/24', '2001:db8:abcd::/48', '198.51.100.7']";

@Controller('al')
class AllowListController {
  @Get('limited')
  @RateLimit('2/m', { key: keys.ip })
  limited() {
    return 'ok';
  }
}

const statuses = async (h: AppHandle, forwardedFor?: string) =>
  (
    await times(3, () =>
      h.get('/al/limited', forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }),
    )
  ).map((r) => [r.status, r.rl['x-ratelimit-remaining'] ?? null]);

const LIMITED = [
  [200, '1'],
  [200, '0'],
  [429, '0'],
];
const EXEMPT = [
  [200, null],
  [200, null],
  [200, null],
];

it('the docs holds the allow-list recipe exactly as this suite runs it', () => {
  expect(readme).toContain(RECIPE);
  expect(readme).toContain('trustedProxies: 1,');
});

describe.each(PLATFORMS)('the docs allow-list recipe on %s, behind one proxy', (platform) => {
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(
      platform,
      {
        trustedProxies: 1,
        allowList: ['203.0.113.0/24', '2001:db8:abcd::/48', '198.51.100.7'],
      },
      [AllowListController],
    );
  });
  afterAll(() => h?.close());

  it('the office range and the health checker are never limited, nor told of limits', async () => {
    expect(await statuses(h, '203.0.113.25')).toEqual(EXEMPT);
    expect(await statuses(h, '198.51.100.7')).toEqual(EXEMPT);
    // IPv6 in the /48, in any spelling; matched whole, not grouped by ipv6Subnet.
    expect(await statuses(h, '2001:DB8:ABCD:0042::1')).toEqual(EXEMPT);
    // An IPv4-mapped IPv6 address is the IPv4 client.
    expect(await statuses(h, '::ffff:203.0.113.26')).toEqual(EXEMPT);
  });

  it('anyone else is limited: the next address, the next /48, the proxy itself', async () => {
    expect(await statuses(h, '203.0.114.1')).toEqual(LIMITED);
    expect(await statuses(h, '198.51.100.8')).toEqual(LIMITED);
    expect(await statuses(h, '2001:db8:abce::1')).toEqual(LIMITED);
    // No header: the peer (127.0.0.1) is the client.
    expect(await statuses(h)).toEqual(LIMITED);
  });

  it('a spoofed left-most X-Forwarded-For entry exempts no one: only the entry the proxy appended counts', async () => {
    // The client sent "203.0.113.25"; the proxy appended the address it saw.
    expect(await statuses(h, '203.0.113.25, 192.0.2.44')).toEqual(LIMITED);
    expect(await statuses(h, '198.51.100.7,2001:db8:ffff::9')).toEqual(LIMITED);
    // And the other way round: an office client behind a spoofing client is still exempt.
    expect(await statuses(h, '192.0.2.45, 203.0.113.27')).toEqual(EXEMPT);
  });
});

describe.each(PLATFORMS)('the allow-list without trustedProxies on %s', (platform) => {
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(platform, { allowList: ['127.0.0.0/8'] }, [AllowListController]);
  });
  afterAll(() => h?.close());

  it("matches the platform's own request.ip, and never believes X-Forwarded-For", async () => {
    // The test client connects from 127.0.0.1, whatever it claims.
    expect(await statuses(h, '192.0.2.1')).toEqual(EXEMPT);
  });
});

describe.each(PLATFORMS)('an allow-list that does not cover the client on %s', (platform) => {
  let h: AppHandle;
  beforeAll(async () => {
    h = await createApp(platform, { allowList: ['10.0.0.0/8', '::1'] }, [AllowListController]);
  });
  afterAll(() => h?.close());

  it('limits it, and a client-sent X-Forwarded-For changes nothing', async () => {
    expect(await statuses(h, '10.1.2.3')).toEqual(LIMITED);
  });
});

describe('allowList at bootstrap', () => {
  const quiet = { warn: () => undefined } as never;

  it.each([
    [
      ['10.0.0.0/8', '10.0.0.1/8'],
      'invalid allowList entry "10.0.0.1/8": it has host bits set: write the network 10.0.0.0/8, or the address alone (in RateLimitModule options, allowList[1])',
    ],
    [
      ['2001:db8::1/32'],
      'invalid allowList entry "2001:db8::1/32": it has host bits set: write the network 2001:db8::/32, or the address alone (in RateLimitModule options, allowList[0])',
    ],
    [
      ['10.0.0.0/33'],
      'invalid allowList entry "10.0.0.0/33": the prefix length must be 0 to 32 (in RateLimitModule options, allowList[0])',
    ],
    [
      ['2001:db8::/129'],
      'invalid allowList entry "2001:db8::/129": the prefix length must be 0 to 128',
    ],
    [['10.0.0.0/'], 'invalid allowList entry "10.0.0.0/": the prefix length must be 0 to 32'],
    [['office'], 'invalid allowList entry "office": expected an IPv4 or IPv6 address'],
    [['10.0.0.256'], 'invalid allowList entry "10.0.0.256": expected an IPv4 or IPv6 address'],
    [['10.0.0.0/8/8'], 'invalid allowList entry "10.0.0.0/8/8": expected an IPv4 or IPv6'],
    [['fe80::1%eth0'], 'invalid allowList entry "fe80::1%eth0": expected an IPv4 or IPv6'],
    [[42], 'invalid allowList entry 42: expected an IP address or a CIDR range'],
    ['10.0.0.0/8', 'invalid allowList "10.0.0.0/8": expected an array of IP addresses'],
  ])(
    'rejects %j with ERR_RATE_LIMIT_OPTION, quoting the entry and where it is',
    async (list, message) => {
      const failure = await createResources(
        { store: 'memory', allowList: list as never },
        quiet,
      ).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(RateLimitConfigError);
      expect(failure).toMatchObject({ code: 'ERR_RATE_LIMIT_OPTION' });
      expect((failure as Error).message).toContain(message);
    },
  );

  it('accepts addresses and ranges of both families, /0 and full-length prefixes included', async () => {
    const resources = await createResources(
      {
        store: 'memory',
        allowList: ['0.0.0.0/0', '::/0', '192.0.2.1/32', '2001:db8::1/128', '::ffff:10.0.0.0/104'],
      },
      quiet,
    );
    expect(resources.store).toBeDefined();
    await resources.store.close?.();
  });
});
