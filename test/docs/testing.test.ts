/**
 * docs/guides/testing.md: its two clock examples are whole Jest test files, imported here as
 * written (their `describe` blocks run in this suite, on the package built from lib/); and the
 * page's rule that a fake `Date` must be installed before the memory store is created.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { MemoryStore, RateLimiter } from '../../lib/index.js';
import { recipeBlock, typeErrors, writeBlock } from './support/doc-blocks.js';

const PAGE = 'docs/guides/testing.md';
const EXAMPLES = ['clock-injected', 'clock-fake-date'];
const files = EXAMPLES.map((name) => writeBlock(`testing.${name}`, recipeBlock(PAGE, name)));

it('the clock examples compile as whole test files', () => {
  expect(typeErrors(files)).toEqual([]);
}, 120_000);

// Each example's `describe` registers here: "the pro plan: 100 a minute" (injected clock) and
// "... on a fake Date" each admit 100, refuse the 101st with Retry-After: 1, then admit
// exactly one more once their clock has moved 600 ms.
for (const file of files) await import(file.href);

describe('a fake Date reaches the memory store only if installed before the store is created', () => {
  const ONE_A_DAY = { rate: '1/d' } as const;
  afterEach(() => {
    jest.useRealTimers();
  });

  it('a store created before jest.useFakeTimers keeps the real clock; one created after follows the fake', async () => {
    const before = new RateLimiter({ store: new MemoryStore() });
    jest.useFakeTimers({ now: Date.parse('2026-01-01T00:00:00Z') });
    const after = new RateLimiter({ store: new MemoryStore() });
    for (const limiter of [before, after]) {
      expect((await limiter.consume('user:1', ONE_A_DAY)).allowed).toBe(true);
      expect((await limiter.consume('user:1', ONE_A_DAY)).allowed).toBe(false);
    }
    // A whole period on the fake clock: only the store that reads it has refilled.
    jest.setSystemTime(Date.now() + 86_400_000);
    expect((await after.consume('user:1', ONE_A_DAY)).allowed).toBe(true);
    expect((await before.consume('user:1', ONE_A_DAY)).allowed).toBe(false);
  });
});
