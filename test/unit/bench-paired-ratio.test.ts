import { describe, expect, it } from '@jest/globals';
import { pairedRatio } from '../../bench/support.js';

describe('bench: a ratio paired per round', () => {
  it('is the median of the rounds’ own ratios, not the ratio of the medians', () => {
    // Round 2 ran slow for both: paired, it agrees with the others.
    expect(pairedRatio([10, 20, 11], [20, 40, 22])).toEqual({
      median: 0.5,
      min: 0.5,
      max: 0.5,
      spread: false,
    });
  });

  it('flags rounds beyond ±15% of the median, either side', () => {
    expect(pairedRatio([10, 11.5, 10], [20, 20, 20])?.spread).toBe(false); // 0.575: +15%
    expect(pairedRatio([10, 11.6, 10], [20, 20, 20])?.spread).toBe(true);
    expect(pairedRatio([10, 8.4, 10], [20, 20, 20])?.spread).toBe(true);
    // A negative median (a variant that saves, or noise): the bound is on its size.
    expect(pairedRatio([-10], [20])?.spread).toBe(false);
    expect(pairedRatio([-10, -11.6, -10], [20, 20, 20])?.spread).toBe(true);
  });

  it('gives no ratio when a round’s base is 0 or less', () => {
    expect(pairedRatio([10, 10], [20, -1])).toBeUndefined();
    expect(pairedRatio([], [])).toBeUndefined();
  });
});
