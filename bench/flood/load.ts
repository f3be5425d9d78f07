/**
 * The load of the flood reproduction (issue 22, finding 1), in an OS process of its own so
 * it never shares the app's event loop (bench/flood.ts runs it; so does the regression test
 * test/e2e/flood.test.ts, through tsx):
 *
 *   node load.js '{"url":"http://127.0.0.1:3000/limited","connections":1000,"requests":20000}'
 *
 * One client (127.0.0.1) sends `requests` requests over `connections` keep-alive sockets,
 * each socket one request after the other. With `probes`, another client (127.0.0.2, its own
 * budget) first spends its budget and is refused once, then sends `probes` requests spread
 * over the flood: each one it is admitted is a refusal forgotten. Prints one JSON line: the
 * flood's and the probes' answers, `admitted` (2xx with rate-limit headers, decided by the
 * store), `failOpen` (2xx without them: admitted without a decision), `refused` (429),
 * `other` (anything else, errors included; `otherKinds` says which), and the flood's duration
 * in ms.
 */
import { Agent, request } from 'node:http';

interface Options {
  url: string;
  connections: number;
  requests: number;
  probes?: number;
  /** Requests the probing client sends before the flood, to be refused once at least. */
  probeBudget?: number;
}

interface Tally {
  admitted: number;
  failOpen: number;
  refused: number;
  other: number;
}

/** What the `other` answers were: status codes and error codes, with their counts. */
const otherKinds: Record<string, number> = {};
const otherOf = (kind: string) => (otherKinds[kind] = (otherKinds[kind] ?? 0) + 1);

const options = JSON.parse(process.argv[2] ?? '{}') as Options;
const { url, connections, requests, probes = 0, probeBudget = 4 } = options;

const tally = (): Tally => ({ admitted: 0, failOpen: 0, refused: 0, other: 0 });

function send(agent: Agent, into: Tally, localAddress?: string): Promise<void> {
  return new Promise((resolve) => {
    const req = request(url, { agent, ...(localAddress && { localAddress }) }, (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 200 && status < 300) {
        if (res.headers['x-ratelimit-remaining'] !== undefined) into.admitted++;
        else into.failOpen++;
      } else if (status === 429) into.refused++;
      else {
        into.other++;
        otherOf(String(status));
      }
      res.resume();
      res.on('end', resolve);
      res.on('error', () => resolve());
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      into.other++;
      otherOf(error.code ?? error.message);
      resolve();
    });
    req.end();
  });
}

const probeAgent = new Agent({ keepAlive: true, maxSockets: 1 });
const probeTally = tally();
const before = tally();
for (let i = 0; i < (probes > 0 ? probeBudget : 0); i++)
  await send(probeAgent, before, '127.0.0.2');

const agent = new Agent({ keepAlive: true, maxSockets: connections });
const flood = tally();
let started = 0;
let done = 0;
let probed = 0;
const probesDone: Promise<void>[] = [];
const lane = async (): Promise<void> => {
  while (started < requests) {
    started++;
    await send(agent, flood);
    done++;
    // A probe each time another share of the flood is answered: spread over all of it.
    if (probed < probes && done >= ((probed + 1) * requests) / (probes + 1)) {
      probed++;
      probesDone.push(send(probeAgent, probeTally, '127.0.0.2'));
    }
  }
};
const t0 = performance.now();
await Promise.all(Array.from({ length: Math.min(connections, requests) }, lane));
const ms = Math.round(performance.now() - t0);
await Promise.all(probesDone);
agent.destroy();
probeAgent.destroy();
console.log(
  JSON.stringify({
    flood,
    ms,
    ...(probes > 0 && { probeBefore: before, probes: probeTally }),
    ...(Object.keys(otherKinds).length > 0 && { otherKinds }),
  }),
);
