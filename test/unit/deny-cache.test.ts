import { describe, expect, it } from '@jest/globals';
import { type Decision } from '../../lib/index.js';
import { DenyCache } from '../../lib/core/call/deny-cache.js';

const denied = (retryAfterMs: number): Decision => ({
  allowed: false,
  reason: 'limit_exceeded',
  policies: [
    { name: 'burst', allowed: false, limit: 5, remaining: 0, resetMs: 60_000, retryAfterMs },
    {
      name: 'daily',
      allowed: true,
      limit: 100,
      remaining: 40,
      resetMs: 3_600_000,
      retryAfterMs: 0,
    },
  ],
});

describe('DenyCache', () => {
  it('answers a remembered denial with its waits counted down, until maxAgeMs', () => {
    let now = 1000;
    const cache = new DenyCache({ clock: () => now, maxAgeMs: 5000 });
    cache.remember('r', denied(12_000), ['rl:{u}:']);
    now += 1500;
    expect(cache.get('r')!.policies.map((p) => [p.retryAfterMs, p.resetMs])).toEqual([
      [10_500, 58_500],
      [0, 3_598_500],
    ]);
    now += 3499;
    expect(cache.get('r')).toBeDefined();
    now += 1;
    expect(cache.get('r')).toBeUndefined();
  });

  it('asks again when the wait is over, before maxAgeMs', () => {
    let now = 0;
    const cache = new DenyCache({ clock: () => now, maxAgeMs: 10_000 });
    cache.remember('r', denied(1200), ['rl:{u}:']);
    now = 1199;
    expect(cache.get('r')!.policies[0]!.retryAfterMs).toBe(1);
    now = 1200;
    expect(cache.get('r')).toBeUndefined();
  });

  it('keeps short waits and admissions out, and forgets an identity on demand', () => {
    const cache = new DenyCache({ clock: () => 0, minRetryAfterMs: 1000 });
    cache.remember('short', denied(999), ['rl:{u}:']);
    cache.remember('ok', { allowed: true, policies: [] }, ['rl:{u}:']);
    cache.remember('a', denied(5000), ['rl:{u}:']);
    cache.remember('b', denied(5000), ['rl:{v}:']);
    expect(cache.size).toBe(2);
    cache.invalidate('rl:{u}:');
    expect([cache.get('a'), cache.get('b')?.allowed]).toEqual([undefined, false]);
  });

  it('is bounded: the least recently used goes first', () => {
    const cache = new DenyCache({ clock: () => 0, maxEntries: 2 });
    cache.remember('a', denied(5000), []);
    cache.remember('b', denied(5000), []);
    cache.get('a'); // a is now the most recent
    cache.remember('c', denied(5000), []);
    expect([cache.get('a') !== undefined, cache.get('b'), cache.get('c') !== undefined]).toEqual([
      true,
      undefined,
      true,
    ]);
  });

  it('a clock that steps back drops the denial instead of keeping it longer', () => {
    let now = 10_000;
    const cache = new DenyCache({ clock: () => now });
    cache.remember('r', denied(5000), []);
    now = 5000;
    expect(cache.get('r')).toBeUndefined();
  });

  it('counts waits down in whole ms on a fractional clock', () => {
    let now = 0.25;
    const cache = new DenyCache({ clock: () => now });
    cache.remember('r', denied(5000), []);
    now = 7.98;
    expect(cache.get('r')!.policies.map((p) => [p.retryAfterMs, p.resetMs])).toEqual([
      [4993, 59_993],
      [0, 3_599_993],
    ]);
  });

  it('refuses bad options with the value', () => {
    expect(() => new DenyCache({ maxAgeMs: 0 })).toThrow(
      'invalid denyCache.maxAgeMs 0: expected an integer >= 1',
    );
    expect(() => new DenyCache({ maxEntries: 1.5 })).toThrow('invalid denyCache.maxEntries 1.5');
  });
});
