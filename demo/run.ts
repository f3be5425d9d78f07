/**
 * `npm run demo`: drives real HTTP traffic from simulated clients at the sample app and
 * checks that every limit held. Exits 1 if one did not.
 *
 *   DEMO_URL=http://127.0.0.1:3000  use that running app instead of starting one
 *   REDIS_URL, PLATFORM             passed on to the app the demo starts
 */
import { randomUUID } from 'node:crypto';
import { startApp, waitHealthy, type RunningApp } from './app.js';
import { cast, drive } from './clients.js';
import { cooperativeBursts, renderBursts } from './cooperative.js';
import { renderTable, verdictLine } from './report.js';
import { judge } from './verdict.js';

/** How long the clients run, together. */
const TRAFFIC_MS = 20_000;

const began = performance.now();
let app: RunningApp | undefined;
process.once('SIGINT', () => {
  void app?.stop().finally(() => process.exit(130));
  if (!app) process.exit(130);
});

async function main(): Promise<boolean> {
  const given = process.env.DEMO_URL?.replace(/\/+$/, '');
  if (given) {
    if (!(await waitHealthy(given, 10_000))) throw new Error(`no answer from ${given}/health`);
    console.log(`app: ${given} (DEMO_URL), running on its own settings`);
  } else {
    app = await startApp();
    const store = app.log.find((l) => l.includes('rate limits in'))?.replace(/^.*\] /, '');
    console.log(`app: started on ${app.url} (${process.env.PLATFORM ?? 'express'}); ${store}`);
  }
  const base = given ?? app!.url;
  const run = randomUUID().slice(0, 8);
  const specs = cast(run);
  console.log(`run ${run}: ${specs.length} clients for ${TRAFFIC_MS / 1000} s...`);
  const samples = await Promise.all(specs.map((spec) => drive(base, spec, TRAFFIC_MS)));
  const bursts = renderBursts(await cooperativeBursts(base, run));
  await app?.stop();
  const results = specs.map((spec, i) => ({ spec, summary: judge(spec, samples[i]!) }));

  console.log(`\n${renderTable(results)}\n`);
  // Run ids cannot make an address unique: say why those two may show less than a full budget.
  console.log(
    'scraper and brute-force count per IP (127.0.0.1): on Redis or a running app, earlier\n' +
      'traffic from it may have spent part of their budget; the checks are upper bounds.\n',
  );
  for (const { spec, summary } of results) console.log(verdictLine(spec, summary));
  const complaints = app?.log.filter((l) => /\b(WARN|ERROR)\b/.test(l)) ?? [];
  if (complaints.length) console.log(`\nthe app logged:\n${complaints.join('\n')}`);
  console.log(
    `\nthe same burst through the cooperative client and through fetch:\n${bursts.lines.join('\n')}`,
  );
  if (!bursts.passed)
    console.log('the cooperative client let a 429 reach its caller, or fetch met none');
  const passed = bursts.passed && results.every((r) => r.summary.problems.length === 0);
  const seconds = ((performance.now() - began) / 1000).toFixed(1);
  console.log(`\n${passed ? 'demo passed' : 'demo FAILED'} in ${seconds} s`);
  return passed;
}

main().then(
  (passed) => process.exit(passed ? 0 : 1),
  async (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    await app?.stop();
    process.exit(1);
  },
);
