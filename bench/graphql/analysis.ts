/**
 * Part `graphql` (issue 25): what the operation cost analysis adds to the CPU of a 20-field
 * query on Apollo Server. The same schema and query run through Apollo's `executeOperation`
 * (parse, validate, execute, format: no HTTP) without a plugin, and with one that does what
 * the module's plugin does around the store call: `requestedCost` once the operation is
 * resolved, `actualCost` on the result. CPU time per operation (`process.cpuUsage`), medians of
 * interleaved rounds. The store call is the HTTP part's business, not the analysis's.
 */
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import * as graphql from 'graphql';
import {
  actualCost,
  DEFAULT_OPERATION_LIMITS,
  operationLimitExceeded,
  requestedCost,
} from 'nest-rate-limit/graphql';
import { runAnalysisTable, type AnalysisRow } from './adversarial.js';

export interface GraphQLBenchResult {
  /** µs of CPU per operation, medians. */
  plainUs: number;
  analysedUs: number;
  /** analysed / plain. */
  ratio: number;
  /** The analysis on the adversarial documents, beside graphql-js (adversarial.ts). */
  documents: AnalysisRow[];
}

const SDL = `
type Author { id: Int! name: String! }
type Item { id: Int! name: String! price: Float! author: Author! }
type Query { ${Array.from({ length: 20 }, (_, i) => `f${i}(first: Int): [Item!]!`).join(' ')} }
`;

/** 20 root fields, each a list of 3 items with a nested object. */
const QUERY = `{ ${Array.from(
  { length: 20 },
  (_, i) => `f${i}(first: 5) { id name price author { id name } }`,
).join(' ')} }`;

const ITEMS = [1, 2, 3].map((id) => ({
  id,
  name: `item ${id}`,
  price: id * 1.5,
  author: { id, name: `author ${id}` },
}));

function server(plugins: ApolloServerPlugin[]): ApolloServer {
  const schema = graphql.buildSchema(SDL);
  const query = schema.getQueryType()!;
  for (const field of Object.values(query.getFields())) field.resolve = () => ITEMS;
  return new ApolloServer({ schema, plugins });
}

/** What the module's Apollo plugin computes (limits, requested, actual), without the store call. */
const analysis: ApolloServerPlugin = {
  requestDidStart() {
    let requested = 0;
    return Promise.resolve({
      didResolveOperation(rc) {
        const input = {
          schema: rc.schema,
          document: rc.document,
          operationName: rc.operationName,
          variables: rc.request.variables,
        };
        if (operationLimitExceeded(graphql, input, DEFAULT_OPERATION_LIMITS)) {
          throw new Error('the bench query exceeds a limit');
        }
        requested = requestedCost(graphql, {
          schema: rc.schema,
          document: rc.document,
          operationName: rc.operationName,
          variables: rc.request.variables,
        });
        return Promise.resolve();
      },
      willSendResponse(rc) {
        const body = rc.response.body;
        if (body.kind !== 'single') return Promise.resolve();
        const actual = actualCost(graphql, {
          schema: rc.schema,
          document: rc.document!,
          operationName: rc.operationName,
          data: body.singleResult.data,
        });
        body.singleResult.extensions = { cost: { requested, actual } };
        return Promise.resolve();
      },
    });
  },
};

async function cpuPerOperation(apollo: ApolloServer, operations: number): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < operations; i++) {
    const result = await apollo.executeOperation({ query: QUERY });
    if (result.body.kind !== 'single' || result.body.singleResult.errors) {
      throw new Error(`the bench query failed: ${JSON.stringify(result.body)}`);
    }
  }
  const { user, system } = process.cpuUsage(before);
  return (user + system) / operations;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;

export async function runGraphQLBench(options: {
  rounds: number;
  operations: number;
  log: (line: string) => void;
}): Promise<GraphQLBenchResult> {
  const { rounds, operations, log } = options;
  const plain = server([]);
  const analysed = server([analysis]);
  await Promise.all([plain.start(), analysed.start()]);
  try {
    // Warm both (JIT, Apollo's document cache) before measuring.
    await cpuPerOperation(plain, 500);
    await cpuPerOperation(analysed, 500);
    const samples = { plain: [] as number[], analysed: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      samples.plain.push(await cpuPerOperation(plain, operations));
      samples.analysed.push(await cpuPerOperation(analysed, operations));
    }
    const plainUs = median(samples.plain);
    const analysedUs = median(samples.analysed);
    const ratio = analysedUs / plainUs;
    log('\nGraphQL: CPU per operation of a 20-field query on Apollo Server (executeOperation)');
    log(`  Apollo alone            ${plainUs.toFixed(1)} µs`);
    log(
      `  with the cost analysis  ${analysedUs.toFixed(1)} µs  (${((ratio - 1) * 100).toFixed(1)}% more; target ≤ 20%)`,
    );
    const documents = runAnalysisTable({ rounds, log, apolloUs: plainUs });
    return { plainUs, analysedUs, ratio, documents };
  } finally {
    await Promise.all([plain.stop(), analysed.stop()]);
  }
}
