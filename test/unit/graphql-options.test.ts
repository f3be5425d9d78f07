/**
 * The module's `graphql` option (issue 25) fails at bootstrap with the offending value and
 * where it came from.
 */
import { describe, expect, it } from '@jest/globals';
import { RateLimitConfigError } from '../../lib/index.js';
import { declareBudgets, validateCostOptions } from '../../lib/nest/graphql/options.js';

describe('the graphql option', () => {
  it.each([
    ['maxCost 0', { maxCost: 0 }, /invalid maxCost 0/],
    ['maxCost 1.5', { maxCost: 1.5 }, /invalid maxCost 1\.5/],
    ['defaultListSize -1', { defaultListSize: -1 }, /invalid defaultListSize -1/],
    ['minimumCost NaN', { minimumCost: NaN }, /invalid minimumCost NaN/],
    [
      'operationTypeCost of a string',
      { operationTypeCost: { mutation: 'x' } },
      /invalid operationTypeCost/,
    ],
    [
      'operationTypeCost of an unknown type',
      { operationTypeCost: { query: 1, batch: 2 } },
      /invalid operationTypeCost/,
    ],
    ['countIntrospection "no"', { countIntrospection: 'no' }, /invalid countIntrospection "no"/],
    ['costInResponse 1', { costInResponse: 1 }, /invalid costInResponse 1/],
    ['a budget that is no rate', { budget: '10 per hour' }, /budget/],
    ['a budget with a cost', { budget: { rate: '10/h', cost: 2 } }, /a budget takes no cost/],
    ['a budget with count', { budget: [{ rate: '10/h', count: 'failed' }] }, /budget\[0\]/],
    ['maxDepth 0', { maxDepth: 0 }, /invalid maxDepth 0: expected an integer >= 1, or Infinity/],
    ['maxHeight 2.5', { maxHeight: 2.5 }, /invalid maxHeight 2\.5/],
    ['maxAliases -1', { maxAliases: -1 }, /invalid maxAliases -1/],
    ['maxRootFields "10"', { maxRootFields: '10' }, /invalid maxRootFields "10"/],
    ['maxTokens NaN', { maxTokens: NaN }, /invalid maxTokens NaN/],
    ['maxTokens -Infinity', { maxTokens: -Infinity }, /invalid maxTokens -Infinity/],
    ['maxAnalysisSteps null', { maxAnalysisSteps: null }, /invalid maxAnalysisSteps null/],
  ])('refuses %s', (_, options, message) => {
    let error: unknown;
    try {
      validateCostOptions(options as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).toContain('RateLimitModule options graphql');
  });

  it('takes each limit as a positive integer, or Infinity to turn it off', () => {
    for (const name of [
      'maxDepth',
      'maxHeight',
      'maxAliases',
      'maxRootFields',
      'maxTokens',
      'maxAnalysisSteps',
    ]) {
      expect(() => validateCostOptions({ [name]: 1 })).not.toThrow();
      expect(() => validateCostOptions({ [name]: Infinity })).not.toThrow();
    }
  });

  it('declares a rate as the budget "cost" in scope "graphql", and stacked ones by name', () => {
    const [one] = declareBudgets({ budget: '1000/h' });
    expect(one).toMatchObject({ name: 'cost', options: { scope: 'graphql' } });
    expect(one!.policy).toMatchObject({ limit: 1000, periodMs: 3_600_000 });
    const stacked = declareBudgets({
      budget: [{ rate: '1000/h' }, { rate: '50/s', name: 'burst', algorithm: 'gcra' }],
    });
    expect(stacked.map((d) => d.name)).toEqual(['cost', 'burst']);
  });
});
