import { describe, expect, it } from '@jest/globals';
import { definePolicy } from '../../lib/core/limiter.js';
import { RateLimitEvents } from '../../lib/nest/observability/events.js';
import { Insurance } from '../../lib/nest/pipeline/stages/insurance.js';
import type { Entry } from '../../lib/nest/pipeline/entry-resolver.js';

describe('Insurance limits', () => {
  const events = new RateLimitEvents({ warn: () => undefined } as never);
  const policy = definePolicy({ name: 'default', rate: { limit: 3, periodMs: 60_000 } });
  const entries = [{ rule: {}, entry: { identity: 'ip:10.0.0.1', policy } }] as unknown as Entry[];
  const allowed = async (insurance: Insurance) =>
    (await insurance.decide(entries, 'GET /x')).decision.allowed;

  it("decide at this process's share: 3 over 3 instances is 1", async () => {
    const insurance = new Insurance(() => 3, 'p', events);
    expect([await allowed(insurance), await allowed(insurance)]).toEqual([true, false]);
    insurance.close();
  });

  // Review L3: the local store was never closed at shutdown (its sweep timer and counts lived
  // on with the closed app). close() drops it: a later decision starts from an empty store.
  it('close() drops the local store and its counts', async () => {
    const insurance = new Insurance(() => 3, 'p', events);
    expect(await allowed(insurance)).toBe(true);
    insurance.close();
    expect(await allowed(insurance)).toBe(true);
    insurance.close();
  });
});
