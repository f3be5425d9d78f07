/**
 * The cost analysis never costs the server more than the request: on each document that made it
 * the cheapest attack (the F-chain of fragments spread ten times per level, S aliases × M
 * fragments, a 2,000-level selection), the CPU time of the operation limits and of the requested
 * cost stays below graphql-js's own `validate` of the same document, and the actual cost's below
 * three times it (it runs after execution, which costs more than both on these documents).
 * Measured in a process of its own (graphql-cpu-worker.ts) with process.cpuUsage, the least of
 * three runs: CPU time, never wall-clock time, and no other test's work in it.
 */
import { describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const WORKER = fileURLToPath(new URL('./graphql-cpu-worker.ts', import.meta.url));

interface Measure {
  us: number;
  outcome: string;
}
interface Result {
  name: string;
  bytes: number;
  validate: Measure;
  execute: Measure;
  limits: Measure;
  requested: Measure;
  actual: Measure;
}

/** A generous bound of any one analysis, in µs of CPU: a hundred times what they take. */
const BUDGET_US = 1_000_000;

const results: Result[] = await (async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', WORKER, '3'], {
    maxBuffer: 1 << 24,
  });
  return JSON.parse(stdout) as Result[];
})();

const byName = (prefix: string): Result => {
  const found = results.find((r) => r.name.startsWith(prefix));
  if (!found) throw new Error(`no document ${prefix}`);
  return found;
};

describe('the analysis costs less CPU than graphql-js validating the same document', () => {
  const adversarial = results.filter((r) => !r.name.startsWith('normal'));

  it.each(adversarial.map((r) => [r.name, r] as const))('%s', (_name, r) => {
    expect(r.limits.us + r.requested.us).toBeLessThanOrEqual(r.validate.us);
    expect(r.actual.us).toBeLessThanOrEqual(3 * r.validate.us);
    for (const part of [r.limits, r.requested, r.actual]) {
      expect(part.us).toBeLessThan(BUDGET_US);
    }
  });
});

describe('what each adversarial document gets', () => {
  it('the F-chain at 8 and 9 levels (620 and 702 bytes) is priced 1 point at once: graphql-js runs __typename once', () => {
    for (const levels of [8, 9]) {
      const r = byName(`F-chain, ${levels} levels`);
      expect(r.requested.outcome).toBe('1');
      expect(r.actual.outcome).toBe('1');
      // 10^(levels-1) root fields by the spread: refused by the limits before any walk
      expect(r.limits.outcome).toBe('"maxRootFields"');
    }
  });

  it('S aliases × M fragments, 93 KB: refused (a fragment chain deeper than the walk follows) without walking S × M', () => {
    const r = byName('1600 aliases × 1350 fragments');
    expect(r.bytes).toBeGreaterThan(90_000);
    expect(r.requested.outcome).toBe('refused maxDepth');
    expect(r.limits.outcome).toBe('"maxHeight"');
  });

  it('S aliases × M fragments within the walk: 2,500 aliases priced in one walk of the chain', () => {
    const r = byName('2500 aliases × 300 fragments');
    expect(r.requested.outcome).toBe('2500'); // 2500 × Conn 1 (total is a free Int)
    // the response walk repeats the chain per alias, as execution does: the budget stops it
    expect(r.actual.outcome).toBe('refused maxAnalysisSteps');
  });

  it('the 77 KB document of aliases over items sized by first', () => {
    const r = byName('1200 aliases × 1100 fragments (sized)');
    expect(r.bytes).toBeGreaterThan(75_000);
    expect(r.requested.outcome).toBe('refused maxDepth');
  });

  it('a 2,000-level selection is refused as too deep, never a stack overflow', () => {
    const r = byName('2000-level nesting');
    expect(r.limits.outcome).toBe('"maxDepth"');
    expect(r.requested.outcome).toBe('refused maxDepth');
    expect(r.actual.outcome).toBe('refused maxDepth');
  });
});
