import { describe, expect, it } from '@jest/globals';
import {
  baseTwin,
  currentOf,
  isBase,
  isOurs,
  withTwinNames,
  withTwins,
} from '../../bench/twins.js';

describe('bench: the @base twins of BENCH_BASELINE', () => {
  it('names a twin after its variant, and back', () => {
    expect(baseTwin('nrl-tb')).toBe('nrl-tb@base');
    expect(currentOf('nrl-tb@base')).toBe('nrl-tb');
    expect(currentOf('nrl-gcra+denyCache@base')).toBe('nrl-gcra+denyCache');
    expect(currentOf('nrl-tb')).toBe('nrl-tb');
    expect(currentOf('rlf-redis')).toBe('rlf-redis');
    expect(isBase('nrl-tb@base')).toBe(true);
    expect(isBase('nrl-tb')).toBe(false);
    // Only ours have twins: a peer's name is never read as one.
    expect(isBase('rlf-redis@base')).toBe(false);
    expect(isOurs('nrl-tb@base')).toBe(true);
    expect(isOurs('floor-redis')).toBe(false);
  });

  it('puts each twin right after its variant, and gives the others none', () => {
    expect(
      withTwinNames(['none', 'floor-redis', 'nrl-tb', 'nrl-tb-observed', 'rlf-redis']),
    ).toEqual([
      'none',
      'floor-redis',
      'nrl-tb',
      'nrl-tb@base',
      'nrl-tb-observed',
      'nrl-tb-observed@base',
      'rlf-redis',
    ]);
    // Twins already there get no twin of their own.
    expect(withTwinNames(['nrl-tb', 'nrl-tb@base'])).toEqual(['nrl-tb', 'nrl-tb@base']);
  });

  it('leaves out a twin the baseline cannot make', () => {
    const items = [{ name: 'floor' }, { name: 'nrl-gcra' }, { name: 'nrl-stacked' }];
    const twins = withTwins(
      items,
      (i) => i.name,
      (i) => (i.name === 'nrl-stacked' ? undefined : { name: baseTwin(i.name) }),
    );
    expect(twins.map((i) => i.name)).toEqual(['floor', 'nrl-gcra', 'nrl-gcra@base', 'nrl-stacked']);
  });
});
