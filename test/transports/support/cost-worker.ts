/**
 * One app of the two-process operation cost test (graphql-cost-processes.test.ts), in an OS
 * process of its own:
 *
 *   node --import tsx/esm test/transports/support/cost-worker.ts '<options as JSON>'
 *
 * Options: `{ server, redis, prefix, budget }`. Prints `listening <url>`; serves until its
 * stdin closes.
 */
import { startCostApp, type CostServer } from './cost-app.js';

const { server, redis, prefix, budget } = JSON.parse(process.argv[2]!) as {
  server: CostServer;
  redis: string;
  prefix: string;
  budget: string;
};
const app = await startCostApp(server, 'code-first', {
  redis,
  prefix,
  timeoutMs: 2000,
  graphql: { budget },
});
process.stdout.write(`listening ${app.url}\n`);
process.stdin.resume();
process.stdin.on('end', () => {
  void app.close().then(() => process.exit(0));
});
