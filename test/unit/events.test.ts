/**
 * `rate_limit.blocked` throttling (issue 7): one line per (route, identity) per interval with
 * the count of what was held back, and a bounded number of lines under a flood of identities.
 * An injected clock stands in for time.
 */
import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import {
  RATE_LIMIT_EVENTS,
  RateLimitBackendError,
  RateLimitConfigError,
  type BlockedDetail,
} from '../../lib/index.js';
import { hashIdentity, RateLimitEvents } from '../../lib/nest/observability/events.js';

function setup() {
  const lines: string[] = [];
  const info: string[] = [];
  const logger = {
    warn: (line: string) => lines.push(line),
    log: (line: string) => info.push(line),
  } as unknown as Logger;
  const clock = { now: 1_000_000 };
  const events = new RateLimitEvents(logger, 10_000, () => clock.now);
  const block = (route: string, identity: string) =>
    events.blocked(route, identity, (): BlockedDetail => ({
      route,
      identity: hashIdentity(identity),
      policies: ['default'],
      cost: 1,
      retryAfterMs: 500,
    }));
  const details = () =>
    lines.map((l) => {
      expect(l.startsWith('rate_limit.blocked {')).toBe(true);
      return JSON.parse(l.slice(l.indexOf('{'))) as Record<string, unknown>;
    });
  return { events, lines, info, clock, block, details };
}

describe('rate_limit.blocked', () => {
  it('logs a pair once per 10 s; the next line counts the refusals held back', () => {
    const { clock, block, details } = setup();
    for (let i = 0; i < 50; i++) block('A.x', 'user:1');
    clock.now += 9_999;
    block('A.x', 'user:1');
    expect(details()).toEqual([
      {
        route: 'A.x',
        identity: hashIdentity('user:1'),
        policies: ['default'],
        cost: 1,
        retryAfterMs: 500,
        count: 1,
      },
    ]);
    clock.now += 1;
    block('A.x', 'user:1');
    // 49 held back in the first interval, 1 at 9,999 ms, and this one.
    expect(details().map((d) => d.count)).toEqual([1, 51]);
    // Other routes and identities are throttled on their own.
    block('A.y', 'user:1');
    block('A.x', 'user:2');
    expect(details().map((d) => [d.route, d.identity, d.count])).toEqual([
      ['A.x', hashIdentity('user:1'), 1],
      ['A.x', hashIdentity('user:1'), 51],
      ['A.y', hashIdentity('user:1'), 1],
      ['A.x', hashIdentity('user:2'), 1],
    ]);
  });

  it('a flood of 20,000 identities in one interval writes 10,000 lines plus one shared line for the route', () => {
    const { clock, block, lines, details } = setup();
    for (let i = 0; i < 20_000; i++) block('A.x', `ip:${i}`);
    expect(lines).toHaveLength(10_001);
    const last = details().at(-1)!;
    expect(last).toMatchObject({ route: 'A.x', identity: '*', count: 1 });
    // The same flood again within the interval: nothing more.
    for (let i = 0; i < 20_000; i++) block('A.x', `ip:${i}`);
    expect(lines).toHaveLength(10_001);
    // After the interval, a new identity takes the place of the pair logged longest ago, and a
    // tracked pair logs again with what it held back (its refusal of the second round).
    clock.now += 10_000;
    block('A.x', 'ip:20000');
    block('A.x', 'ip:9999');
    expect(details().slice(-2)).toEqual([
      expect.objectContaining({ identity: hashIdentity('ip:20000'), count: 1 }),
      expect.objectContaining({ identity: hashIdentity('ip:9999'), count: 2 }),
    ]);
    expect(lines).toHaveLength(10_003);
  });

  // Regression (issue 22, finding 5): the throttle kept each raw identity as given; with
  // `keys.withoutUser(ctx => 'acct:' + body.account)`, 3,000 accounts of 90 KB refused once
  // each took the heap from 18 to 291 MB after GC.
  it('remembers a long identity by its hash: 3,000 identities of 90 KB keep a few hundred KB', () => {
    const { events, block, details } = setup();
    const pairs = (events as unknown as { blockedPairs: Map<string, unknown> }).blockedPairs;
    for (let i = 0; i < 3000; i++) block('A.x', `acct:${i}:${'x'.repeat(90_000)}`);
    expect(details()).toHaveLength(3000);
    expect(pairs.size).toBe(3000);
    const bytes = [...pairs.keys()].reduce((sum, key) => sum + key.length, 0);
    expect(bytes).toBeLessThan(3000 * 64);
    // Still throttled per identity: the same long identity again is held back.
    block('A.x', `acct:7:${'x'.repeat(90_000)}`);
    expect(details()).toHaveLength(3000);
  });

  it('the raw identity never reaches a line', () => {
    const { block, lines } = setup();
    block('A.x', 'apikey-secret-123');
    expect(lines.join('\n')).not.toContain('secret');
  });
});

describe('RATE_LIMIT_EVENTS', () => {
  it('names the stable events', () => {
    expect(RATE_LIMIT_EVENTS).toEqual({
      blocked: 'rate_limit.blocked',
      shadowBlocked: 'rate_limit.shadow_blocked',
      backendError: 'rate_limit.backend_error',
      configError: 'rate_limit.config_error',
      insurance: 'rate_limit.insurance',
      overrideApplied: 'rate_limit.override_applied',
      redisUnreachable: 'rate_limit.redis_unreachable',
      unenforced: 'rate_limit.unenforced',
      overloadEnabled: 'rate_limit.overload_enabled',
      sheddingStarted: 'rate_limit.shedding_started',
      sheddingStopped: 'rate_limit.shedding_stopped',
    });
  });

  // Regression: it logged at WARN, with the rate as "100/60000ms" (limit and periodMs).
  it('override_applied is logged at info level with the rate as written, once per 10 s per route, identity and policy', () => {
    const { events, lines, info } = setup();
    const applied = (identity: string, limit: number, periodMs: number) =>
      events.overrideApplied({ route: 'A.x', identity, policy: 'default', limit, periodMs });
    applied('abc', 100, 60_000);
    applied('abc', 100, 60_000);
    applied('abd', 5, 10_000);
    applied('abe', 7, 1_500);
    expect(lines).toEqual([]);
    expect(info).toEqual([
      `rate_limit.override_applied {"count":1,"route":"A.x","identity":"${hashIdentity('abc')}","policy":"default","rate":"100/m"}`,
      `rate_limit.override_applied {"count":1,"route":"A.x","identity":"${hashIdentity('abd')}","policy":"default","rate":"5/10s"}`,
      `rate_limit.override_applied {"count":1,"route":"A.x","identity":"${hashIdentity('abe')}","policy":"default","rate":"7/1500ms"}`,
    ]);
  });
});

// Regression: 48 would-be refusals wrote 48 WARN lines, against 1 rate_limit.blocked line
// for 45 real refusals.
describe('rate_limit.shadow_blocked', () => {
  it('is throttled like blocked: one line per route and identity per 10 s, counting the rest', () => {
    const { events, lines, clock } = setup();
    const shadow = (route: string, identity: string) =>
      events.shadowBlocked(route, identity, () => ({
        route,
        identity: hashIdentity(identity),
        policy: 'default',
      }));
    for (let i = 0; i < 48; i++) shadow('A.x', 'user:1');
    shadow('A.y', 'user:1');
    shadow('A.x', 'user:2');
    clock.now += 10_000;
    shadow('A.x', 'user:1');
    const parsed = lines.map((l) => {
      expect(l.startsWith('rate_limit.shadow_blocked {')).toBe(true);
      return JSON.parse(l.slice(l.indexOf('{'))) as Record<string, unknown>;
    });
    expect(parsed.map((p) => [p.route, p.identity, p.count])).toEqual([
      ['A.x', hashIdentity('user:1'), 1],
      ['A.y', hashIdentity('user:1'), 1],
      ['A.x', hashIdentity('user:2'), 1],
      // The 47 held back, and this one.
      ['A.x', hashIdentity('user:1'), 48],
    ]);
  });

  it('does not share its throttle with blocked', () => {
    const { events, lines, block } = setup();
    block('A.x', 'user:1');
    events.shadowBlocked('A.x', 'user:1', () => ({ route: 'A.x', identity: 'h' }));
    expect(lines.map((l) => l.slice(0, l.indexOf(' ')))).toEqual([
      'rate_limit.blocked',
      'rate_limit.shadow_blocked',
    ]);
  });
});

describe('the lines that call for action link their heading in docs/reference/errors.md', () => {
  const page = readFileSync(new URL('../../docs/reference/errors.md', import.meta.url), 'utf8');
  const parse = (line: string) =>
    JSON.parse(line.slice(line.indexOf('{'))) as Record<string, unknown>;

  it('backend_error, config_error, insurance and unenforced end with a docs field; the fields before it are kept', () => {
    const { events, lines } = setup();
    events.backendError(
      'A.x',
      new RateLimitBackendError('timeout', 'store timed out after 100 ms'),
    );
    events.configError('A.y', new Error('key exploded'));
    events.throttled(RATE_LIMIT_EVENTS.insurance, 'A.z', { route: 'A.z', instances: 2 });
    events.unenforced({ route: 'A.w', reason: 'give the policy a key' });
    expect(lines.map((l) => l.slice(0, l.indexOf(' ')))).toEqual([
      'rate_limit.backend_error',
      'rate_limit.config_error',
      'rate_limit.insurance',
      'rate_limit.unenforced',
    ]);
    expect(lines.map(parse)).toEqual([
      {
        kind: 'timeout',
        count: 1,
        route: 'A.x',
        message: 'store timed out after 100 ms',
        docs: 'docs/reference/errors.md#rate_limitbackend_error',
      },
      {
        kind: 'A.y',
        count: 1,
        route: 'A.y',
        message: 'key exploded',
        docs: 'docs/reference/errors.md#rate_limitconfig_error',
      },
      {
        kind: 'A.z',
        count: 1,
        route: 'A.z',
        instances: 2,
        docs: 'docs/reference/errors.md#rate_limitinsurance',
      },
      {
        route: 'A.w',
        reason: 'give the policy a key',
        docs: 'docs/reference/errors.md#rate_limitunenforced',
      },
    ]);
    // Each names a heading of the page.
    for (const line of lines) {
      const event = line.slice(0, line.indexOf(' '));
      expect(page).toContain(`\n### ${event}\n`);
      expect(parse(line).docs).toBe(`docs/reference/errors.md#${event.replace('.', '')}`);
    }
  });

  it('a config error of ours carries its code and link in message', () => {
    const { events, lines } = setup();
    events.configError(
      'A.x',
      new RateLimitConfigError('ERR_RATE_LIMIT_IDENTITY', 'a key function returned {}', 'A.x'),
    );
    expect(parse(lines[0]!).message).toBe(
      'a key function returned {} (in A.x) [ERR_RATE_LIMIT_IDENTITY] ' +
        '(see docs/reference/errors.md#err_rate_limit_identity in the nest-rate-limit package)',
    );
  });

  it('blocked, shadow_blocked and override_applied, written under normal traffic, stay short', () => {
    const { events, lines, info, block } = setup();
    block('A.x', 'user:1');
    events.shadowBlocked('A.x', 'user:1', () => ({ route: 'A.x', identity: 'h' }));
    events.overrideApplied({ route: 'A.x', identity: 'u', policy: 'p', limit: 1, periodMs: 1000 });
    expect([...lines, ...info].map((l) => 'docs' in parse(l))).toEqual([false, false, false]);
  });
});
