/**
 * Part `graphql`, second table (issue 32): the CPU time of the cost analysis on the documents
 * that made it the cheapest attack on the server (bench/graphql/documents.ts), beside
 * graphql-js's own `validate` and `execute` of the same documents: the operation limits
 * (`operationLimitExceeded`), the requested cost and the actual cost, each the median of
 * interleaved runs (process.cpuUsage, µs). A refusal (a limit exceeded, the step budget, the
 * nesting bound) is what the analysis answers, and its CPU is what it cost to answer it.
 */
import * as graphql from 'graphql';
import {
  actualCost,
  CostAnalysisLimitError,
  DEFAULT_OPERATION_LIMITS,
  operationLimitExceeded,
  requestedCost,
} from 'nest-rate-limit/graphql';
import { benchDocuments, SDL } from './documents.js';

export interface AnalysisRow {
  name: string;
  bytes: number;
  /** µs of CPU per run, medians. */
  validateUs: number;
  executeUs: number;
  limitsUs: number;
  requestedUs: number;
  actualUs: number;
  /** What each part answered: a cost, `-` (no limit exceeded) or the limit that refused. */
  limits: string;
  requested: string;
  actual: string;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;

function answer(run: () => number | string | undefined): string {
  try {
    return String(run() ?? '-');
  } catch (error) {
    if (error instanceof CostAnalysisLimitError) return `refused ${error.exceeded.limit}`;
    return `threw ${(error as Error).name}`;
  }
}

/** µs of CPU of one run of `run`, the median of `runs` runs (each with its own cpuUsage). */
function cpu(run: () => unknown, runs: number): number {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const before = process.cpuUsage();
    try {
      run();
    } catch {
      // the refusal is the answer; its cost is what is measured
    }
    const { user, system } = process.cpuUsage(before);
    samples.push(user + system);
  }
  return median(samples);
}

export function runAnalysisTable(options: {
  rounds: number;
  log: (line: string) => void;
  /** µs of CPU of the normal query on Apollo Server alone (analysis.ts), if measured. */
  apolloUs?: number;
}) {
  const { rounds, log, apolloUs } = options;
  const schema = graphql.buildSchema(SDL);
  const rows: AnalysisRow[] = [];
  for (const { name, query, data, root } of benchDocuments()) {
    const document = graphql.parse(query);
    const input = { schema, document };
    const parts = {
      validate: () => graphql.validate(schema, document),
      execute: () => graphql.execute({ schema, document, rootValue: root }),
      limits: () => operationLimitExceeded(graphql, input, DEFAULT_OPERATION_LIMITS),
      requested: () => requestedCost(graphql, input),
      actual: () => actualCost(graphql, { ...input, data }),
    };
    // Small documents are measured over many runs, large ones over a few, all interleaved.
    const runs = query.length > 10_000 ? 1 : 200;
    const samples = { validate: [], execute: [], limits: [], requested: [], actual: [] } as Record<
      keyof typeof parts,
      number[]
    >;
    for (let round = 0; round < Math.max(rounds, 3) + 1; round++) {
      for (const key of Object.keys(parts) as (keyof typeof parts)[]) {
        const us = cpu(parts[key], runs);
        if (round > 0) samples[key].push(us); // the first round warms the JIT
      }
    }
    rows.push({
      name,
      bytes: query.length,
      validateUs: median(samples.validate),
      executeUs: median(samples.execute),
      limitsUs: median(samples.limits),
      requestedUs: median(samples.requested),
      actualUs: median(samples.actual),
      limits: answer(() => operationLimitExceeded(graphql, input, DEFAULT_OPERATION_LIMITS)?.limit),
      requested: answer(() => requestedCost(graphql, input)),
      actual: answer(() => actualCost(graphql, { ...input, data })),
    });
  }
  const us = (n: number) => (n >= 1000 ? `${(n / 1000).toFixed(1)} ms` : `${n.toFixed(0)} µs`);
  log('\nGraphQL: CPU of the cost analysis per document, beside graphql-js (medians)');
  log(
    '  document                                       bytes   validate    execute     limits          requested                  actual',
  );
  for (const r of rows) {
    log(
      `  ${r.name.padEnd(44)} ${String(r.bytes).padStart(7)} ${us(r.validateUs).padStart(10)} ${us(r.executeUs).padStart(10)} ${us(r.limitsUs).padStart(10)} ${r.limits.padEnd(14)} ${us(r.requestedUs).padStart(9)} ${r.requested.padEnd(16)} ${us(r.actualUs).padStart(9)} ${r.actual}`,
    );
  }
  const normal = rows[0]!;
  const analysis = normal.limitsUs + normal.requestedUs + normal.actualUs;
  const share = (of: number) => `${((analysis / of) * 100).toFixed(1)}%`;
  log(
    `  normal query: limits + requested + actual ${us(analysis)}, ${share(normal.executeUs)} of graphql-js execute alone` +
      (apolloUs ? `, ${share(apolloUs)} of Apollo's executeOperation (target ≤ 20%)` : ''),
  );
  return rows;
}
