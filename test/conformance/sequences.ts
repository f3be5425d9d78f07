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
 * that the reference still holds. For the same reason only tests of the pure references
 * let the clock step back (`backwards`): a store that has expired a key cannot bring it back.
 */
export function scenarios(
  maxSteps = 60,
  minIntervalMs = 0,
  backwards = false,
): fc.Arbitrary<Scenario> {
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
              { arbitrary: fc.constant(0), weight: 3 },
              {
                arbitrary: fc.integer({ min: 0, max: Math.ceil((2 * periodMs) / limit) }),
                weight: 3,
              },
              { arbitrary: fc.integer({ min: 0, max: 2 * periodMs }), weight: 3 },
              // Now and then the clock steps back, as after a failover to a lagging replica.
              {
                arbitrary: backwards
                  ? fc.integer({ min: -Math.ceil((2 * periodMs) / limit), max: -1 })
                  : fc.constant(0),
                weight: 1,
              },
            ),
            cost: fc.integer({ min: 0, max: (burst ?? limit) + 1 }),
          }),
          { minLength: 1, maxLength: maxSteps },
        ),
      }),
    );
}
