/**
 * The record of recent refusals the limiter keeps for when its store fails (issue 22,
 * findings 1 and 7): a refusal in force is known, counted down on an injected clock, and
 * forgotten when its wait is over or its identity is reset; keyed by client input, it is
 * bounded in entries and in bytes.
 */
import { describe, expect, it } from '@jest/globals';
import type { Decision } from '../../lib/index.js';
import { identityKeyPrefix, policyKey } from '../../lib/core/model/store-keys.js';
import { RecentRefusals } from '../../lib/core/call/refusals.js';
import type { StorePolicy } from '../../lib/core/stores/store.js';

function policy(identity: string, name = 'default', cost = 1): StorePolicy {
  return {
    key: policyKey('rl', identity, 'global', name, 'tb'),
    algorithm: 'token-bucket',
    limit: 3,
    periodMs: 60_000,
    capacity: 3,
    cost,
  };
}

const refusedFor = (retryAfterMs: number, name = 'default'): Decision => ({
  allowed: false,
  reason: 'limit_exceeded',
  policies: [{ name, allowed: false, limit: 3, remaining: 0, resetMs: 60_000, retryAfterMs }],
});

describe('RecentRefusals', () => {
  it('knows a refusal until its wait is over, counted down', () => {
    let now = 1000;
    const refusals = new RecentRefusals({ clock: () => now });
    const p = [policy('ip:192.0.2.1')];
    refusals.remember(p, refusedFor(20_000));
    now += 5_000;
    expect(refusals.refusal(p)).toEqual({
      decision: {
        allowed: false,
        cached: true,
        reason: 'limit_exceeded',
        policies: [
          {
            name: 'default',
            allowed: false,
            limit: 3,
            remaining: 0,
            resetMs: 55_000,
            retryAfterMs: 15_000,
          },
        ],
      },
      indexes: [0],
    });
  });

  it("then holds the key to the policy's rate while the store fails: one every 20 s at 3/m, no more", () => {
    let now = 0;
    const refusals = new RecentRefusals({ clock: () => now });
    const p = [policy('ip:192.0.2.1')];
    refusals.remember(p, refusedFor(20_000));
    now = 20_000;
    // The token the store would have given back by now: taken.
    expect(refusals.refusal(p)).toBeUndefined();
    expect(refusals.refusal(p)?.decision.policies[0]!.retryAfterMs).toBe(20_000);
    now = 50_000;
    expect(refusals.refusal(p)).toBeUndefined();
    expect(refusals.refusal(p)?.decision.policies[0]!.retryAfterMs).toBe(10_000);
    // Left alone long enough to be full again: nothing known against it, and it is dropped.
    now = 200_000;
    expect(refusals.refusal(p)).toBeUndefined();
    expect(refusals.size).toBe(0);
  });

  it('an admission by the store resets the key to what it says remains; an exemption drops it', () => {
    let now = 0;
    const refusals = new RecentRefusals({ clock: () => now });
    const p = [policy('user:1')];
    refusals.remember(p, refusedFor(20_000));
    now = 20_000;
    const admitted = (remaining: number, exempt = false): Decision => ({
      allowed: true,
      policies: [
        {
          name: 'default',
          allowed: true,
          limit: 3,
          remaining,
          resetMs: 20_000,
          retryAfterMs: 0,
          ...(exempt && { exempt: true as const }),
        },
      ],
    });
    refusals.remember(p, admitted(0));
    // The store gave the token: none left for a failure right after.
    expect(refusals.refusal(p)?.decision.policies[0]!.retryAfterMs).toBe(20_000);
    refusals.remember(p, admitted(3, true));
    expect(refusals.size).toBe(0);
  });

  it('a stacked request is refused whole, and spends nothing then', () => {
    let now = 0;
    const refusals = new RecentRefusals({ clock: () => now });
    const burst = policy('user:1', 'burst');
    const daily = policy('user:1', 'daily');
    refusals.remember([burst], refusedFor(20_000, 'burst'));
    refusals.remember([daily], refusedFor(40_000, 'daily'));
    now = 20_000;
    expect(refusals.refusal([burst, daily])?.indexes).toEqual([1]);
    // The burst token is still there.
    expect(refusals.refusal([burst])).toBeUndefined();
  });

  it("a penalty's block is refused as such until it ends", () => {
    let now = 0;
    const refusals = new RecentRefusals({ clock: () => now });
    const p = [policy('user:1')];
    const block = refusedFor(900_000);
    refusals.remember(p, { ...block, policies: [{ ...block.policies[0]!, blocked: true }] });
    now = 600_000;
    expect(refusals.refusal(p)?.decision.policies[0]).toMatchObject({
      blocked: true,
      retryAfterMs: 300_000,
    });
    now = 900_000;
    expect(refusals.refusal(p)).toBeUndefined();
  });

  it('a key refused again takes the new wait (updated in place within 100 ms, moved to the young end after)', () => {
    let now = 0;
    const refusals = new RecentRefusals({ clock: () => now });
    const p = [policy('user:1')];
    refusals.remember(p, refusedFor(1000));
    now = 50;
    refusals.remember(p, refusedFor(950));
    expect(refusals.refusal(p)?.decision.policies[0]!.retryAfterMs).toBe(950);
    refusals.remember(p, refusedFor(60_000));
    expect(refusals.refusal(p)?.decision.policies[0]!.retryAfterMs).toBe(60_000);
    now = 200;
    refusals.remember(p, refusedFor(500));
    expect(refusals.refusal(p)?.decision.policies[0]!.retryAfterMs).toBe(500);
  });

  it('names only the refusing policies of a request, by their index; other identities are unknown', () => {
    const refusals = new RecentRefusals({ clock: () => 0 });
    refusals.remember([policy('user:1', 'burst')], refusedFor(1000, 'burst'));
    const request = [policy('ip:192.0.2.1', 'default'), policy('user:1', 'burst')];
    const known = refusals.refusal(request);
    expect(known?.indexes).toEqual([1]);
    expect(known?.decision.policies.map((p) => p.name)).toEqual(['burst']);
    expect(refusals.refusal([policy('user:2', 'burst')])).toBeUndefined();
  });

  it('keeps no admission, no peek (cost 0), no cost that can never pass; a peek is never refused by it', () => {
    const refusals = new RecentRefusals({ clock: () => 0 });
    refusals.remember([policy('a')], { allowed: true, policies: [] });
    refusals.remember([policy('b', 'default', 0)], refusedFor(1000));
    refusals.remember([policy('c')], { ...refusedFor(Infinity), reason: 'cost_exceeds_limit' });
    expect(refusals.size).toBe(0);
    refusals.remember([policy('d')], refusedFor(1000));
    expect(refusals.refusal([policy('d', 'default', 0)])).toBeUndefined();
  });

  it('forgets an identity (a reset, an override or exemption changed)', () => {
    const refusals = new RecentRefusals({ clock: () => 0 });
    refusals.remember([policy('user:1')], refusedFor(1000));
    refusals.remember([policy('user:2')], refusedFor(1000));
    refusals.forget(identityKeyPrefix('rl', 'user:1'));
    expect(refusals.refusal([policy('user:1')])).toBeUndefined();
    expect(refusals.refusal([policy('user:2')])).toBeDefined();
  });

  it('a clock that steps back drops the refusal rather than keep it longer', () => {
    let now = 10_000;
    const refusals = new RecentRefusals({ clock: () => now });
    refusals.remember([policy('user:1')], refusedFor(1000));
    now = 5_000;
    expect(refusals.refusal([policy('user:1')])).toBeUndefined();
  });

  it('is bounded in entries and in bytes under 20,000 identities of 1,000 characters each, the oldest going first', () => {
    const refusals = new RecentRefusals({ clock: () => 0 });
    for (let i = 0; i < 20_000; i++) {
      // Client input of any length: the key holds its 22-character hash (see identityTag).
      refusals.remember([policy(`ip:${i}:${'x'.repeat(1000)}`)], refusedFor(60_000));
    }
    expect(refusals.size).toBeLessThanOrEqual(10_000);
    expect(refusals.heldBytes).toBeLessThanOrEqual(2 * 1024 * 1024);
    expect(refusals.refusal([policy(`ip:19999:${'x'.repeat(1000)}`)])).toBeDefined();
    expect(refusals.refusal([policy(`ip:0:${'x'.repeat(1000)}`)])).toBeUndefined();
    const tight = new RecentRefusals({ clock: () => 0, maxBytes: 64 * 1024 });
    for (let i = 0; i < 10_000; i++) tight.remember([policy(`user:${i}`)], refusedFor(60_000));
    expect(tight.heldBytes).toBeLessThanOrEqual(64 * 1024);
    expect(tight.size).toBeGreaterThan(100);
  });
});
