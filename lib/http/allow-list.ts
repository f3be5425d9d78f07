import { BlockList, isIP } from 'node:net';
import { quote, RateLimitConfigError } from '../core/errors.js';
import { clientAddress, normalizeIp, type IpOptions, type RequestLike } from './ip.js';

/**
 * Client addresses that are never limited (an office range, health checkers), matched with
 * Node's `BlockList` against the address the module's own rules find (`trustedProxies`,
 * IPv4-mapped IPv6 as IPv4), whole: not grouped by `ipv6Subnet`.
 */
export class AllowList {
  private readonly list = new BlockList();

  /**
   * @param entries IPv4 or IPv6 addresses and CIDR ranges (`10.0.0.0/8`, `2001:db8::/32`)
   * @param where where the entries were written, for the error
   * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION`, quoting the first bad entry
   */
  constructor(
    entries: unknown,
    private readonly ipOptions: IpOptions,
    where: string,
  ) {
    if (!Array.isArray(entries)) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OPTION',
        `invalid allowList ${quote(entries)}: expected an array of IP addresses and CIDR ranges`,
        where,
      );
    }
    entries.forEach((entry: unknown, i) => this.add(entry, `${where}, allowList[${i}]`));
  }

  /** Whether the client of `request` is on the list; false when there is no address. */
  allows(request: RequestLike | undefined): boolean {
    const address = request && clientAddress(request, this.ipOptions);
    if (!address) return false;
    return this.list.check(address, isIP(address) === 4 ? 'ipv4' : 'ipv6');
  }

  private add(entry: unknown, where: string): void {
    const fail = (why: string): never => {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_OPTION',
        `invalid allowList entry ${quote(entry)}: ${why}`,
        where,
      );
    };
    if (typeof entry !== 'string') return fail('expected an IP address or a CIDR range');
    const [address = '', bits, ...rest] = entry.trim().split('/');
    const family = isIP(address);
    if (family === 0 || rest.length > 0 || address.includes('%')) {
      return fail('expected an IPv4 or IPv6 address, or a CIDR range such as 10.0.0.0/8');
    }
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (bits === undefined) return this.list.addAddress(address, type);
    const max = family === 4 ? 32 : 128;
    const prefix = /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
    if (!(prefix >= 0 && prefix <= max)) fail(`the prefix length must be 0 to ${max}`);
    // `10.0.0.1/8` allows all of 10.0.0.0/8: likely a typo for one address, and an
    // allow-list typo opens the API to more clients than meant. Ask for the network.
    const network = networkOf(address, prefix, family);
    const written = family === 4 ? address : normalizeIp(`${address}/128`, 128)!;
    if (prefix < max && network !== `${written}/${prefix}`) {
      fail(`it has host bits set: write the network ${network}, or the address alone`);
    }
    this.list.addSubnet(address, prefix, type);
  }
}

/** `address/prefix` with its host bits cleared, as `normalizeIp` writes a range. */
function networkOf(address: string, prefix: number, family: number): string {
  if (family === 6) return normalizeIp(`${address}/${prefix}`, prefix)!;
  const value = address.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
  // Arithmetic, not bitwise operators, which are signed 32-bit in JavaScript.
  const size = 2 ** (32 - prefix);
  const first = value - (value % size);
  const octets = [24, 16, 8, 0].map((shift) => Math.floor(first / 2 ** shift) % 256);
  return `${octets.join('.')}/${prefix}`;
}
