import fc from 'fast-check';

/** A policy and a request sequence: each step waits `waitMs`, then spends `cost`. */
export interface Scenario {
  limit: number;
  periodMs: number;
  burst: number | undefined;
  steps: { waitMs: number; cost: number }[];
}

/**
 * Random policies, with fractional emission intervals (7/13s and the like) on purpose, and
 * request sequences dense enough to hit the limit and sparse enough to refill.
 *
 * `minIntervalMs` keeps the emission interval (periodMs / limit) at least that long. Tests
 * against Redis need it: Redis expires keys in its own real time, so a 1 ms TTL could
 * lapse while the injected clock stands still, and the two would disagree on a state
 * that the reference still holds.
 */
export function scenarios(maxSteps = 60, minIntervalMs = 0): fc.Arbitrary<Scenario> {
  return fc
    .record({
      periodMs: fc.oneof(
        fc.constantFrom(1, 1000, 13_000, 60_000, 86_400_000),
        fc.integer({ min: 1, max: 100_000 }),
      ),
      burst: fc.option(fc.integer({ min: 1, max: 80 }), { nil: undefined }),
    })
    .filter(({ periodMs }) => periodMs >= minIntervalMs)
    .chain(({ periodMs, burst }) =>
      fc.record({
        limit: fc.integer({
          min: 1,
          max: Math.max(1, Math.min(50, Math.floor(periodMs / Math.max(1, minIntervalMs)))),
        }),
        periodMs: fc.constant(periodMs),
        burst: fc.constant(burst),
      }),
    )
    .chain(({ limit, periodMs, burst }) =>
      fc.record({
        limit: fc.constant(limit),
        periodMs: fc.constant(periodMs),
        burst: fc.constant(burst),
        steps: fc.array(
          fc.record({
            waitMs: fc.oneof(
              fc.constant(0),
              fc.integer({ min: 0, max: Math.ceil((2 * periodMs) / limit) }),
              fc.integer({ min: 0, max: 2 * periodMs }),
            ),
            cost: fc.integer({ min: 0, max: (burst ?? limit) + 1 }),
          }),
          { minLength: 1, maxLength: maxSteps },
        ),
      }),
    );
}
