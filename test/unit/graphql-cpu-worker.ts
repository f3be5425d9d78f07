/**
 * Run by graphql-analysis-cpu.test.ts in a process of its own (`node --import tsx`): the CPU
 * time (process.cpuUsage, user + system, µs) of graphql-js's `validate` and `execute` and of each part of the
 * cost analysis on every bench document, the least of a few runs each. Prints one JSON line.
 */
import * as graphql from 'graphql';
import { benchDocuments, SDL } from '../../bench/graphql/documents.js';
import {
  actualCost,
  CostAnalysisLimitError,
  DEFAULT_OPERATION_LIMITS,
  operationLimitExceeded,
  requestedCost,
} from '../../lib/graphql/index.js';

const RUNS = Number(process.argv[2] ?? 3);

/** µs of CPU of `run`, the least of RUNS runs, and what its last run gave (or threw). */
function cpu(run: () => unknown): { us: number; outcome: string } {
  let best = Infinity;
  let outcome = '';
  for (let i = 0; i < RUNS; i++) {
    const before = process.cpuUsage();
    try {
      outcome = JSON.stringify(run()) ?? 'undefined';
    } catch (error) {
      outcome =
        error instanceof CostAnalysisLimitError
          ? `refused ${error.exceeded.limit}`
          : `threw ${(error as Error).name}`;
    }
    const { user, system } = process.cpuUsage(before);
    best = Math.min(best, user + system);
  }
  return { us: best, outcome };
}

const schema = graphql.buildSchema(SDL);
const results = benchDocuments().map(({ name, query, data, root }) => {
  const document = graphql.parse(query);
  const input = { schema, document };
  return {
    name,
    bytes: query.length,
    validate: cpu(() => graphql.validate(schema, document).length),
    execute: cpu(() => {
      const result = graphql.execute({ schema, document, rootValue: root });
      return 'then' in result ? 'async' : (result.errors?.length ?? 0);
    }),
    limits: cpu(
      () => operationLimitExceeded(graphql, input, DEFAULT_OPERATION_LIMITS)?.limit ?? null,
    ),
    requested: cpu(() => requestedCost(graphql, input)),
    actual: cpu(() => actualCost(graphql, { ...input, data })),
  };
});
process.stdout.write(`${JSON.stringify(results)}\n`);
