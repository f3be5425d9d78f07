/**
 * The cooperative client against rate-limited servers others wrote, on loopback, each limiting
 * 5 requests per 1 s: express-rate-limit 8 with each of its header forms, `@nestjs/throttler`
 * 6.7.1 (its `X-RateLimit-*` carry no window; a refusal blocks for one ttl), and a server
 * that sends nothing but a refusal's `Retry-After`. A burst of 25, and 4 concurrent loops of
 * 10: every request delivered within its attempts, at most 3 server-sent 429s where the server
 * sends any rate-limit field, within 1.5× the least time the limit needs, plus 1 s.
 * (Real time: these are the client's behaviour against real servers; the pacer's rules are
 * proven exactly on an injected clock in pacer.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { burst, itMeetsTheTarget, loops, report, startPeerServers } from './support/workload.js';

const SERVERS = [
  'express-rate-limit draft-6',
  'express-rate-limit draft-7',
  'express-rate-limit draft-8',
  'express-rate-limit legacy headers',
  '@nestjs/throttler 6.7.1',
] as const;

let servers: Awaited<ReturnType<typeof startPeerServers>>;
beforeAll(async () => {
  servers = await startPeerServers();
}, 30_000);
afterAll(() => servers?.stop());

describe.each(SERVERS)('the cooperative client against %s (5 per 1 s)', (server) => {
  itMeetsTheTarget(server, () => servers.urls[server]!);
});

describe('the cooperative client against a server that sends only Retry-After (5 per 1 s)', () => {
  const server = 'Retry-After only';

  it('delivers every request of a burst of 25 (got and ky deliver 20 under their default retries)', async () => {
    const f = await burst(servers.urls[server]!);
    report(server, 'burst of 25', f);
    expect(f.gaveUp).toEqual([]);
    expect(f.delivered).toBe(25);
    // The first burst meets the wall blind (20 refused); then one request at a time, about one
    // refusal a window.
    expect(f.refusals).toBeLessThanOrEqual(20 + 5);
  }, 60_000);

  it('delivers every request of 4 concurrent loops of 10', async () => {
    const f = await loops(servers.urls[server]!);
    report(server, '4 loops of 10', f);
    expect(f.gaveUp).toEqual([]);
    expect(f.delivered).toBe(40);
    // About one refusal a window of the 8 the limit needs, and the first loops' blind start.
    expect(f.refusals).toBeLessThanOrEqual(15);
  }, 120_000);
});
