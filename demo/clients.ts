import { send, sleep, type Call, type Sample } from './traffic.js';

/** A token-bucket policy as the sample app declares it: `limit` per `periodMs`, `limit` at once. */
export interface PolicySpec {
  name: string;
  limit: number;
  periodMs: number;
}

/** A simulated client: what it sends, how fast, and the policies that should hold it. */
export interface ClientSpec {
  name: string;
  /** Route and identity, for the table. */
  route: string;
  /** Every policy that decides its requests, written out independently of the app's code. */
  policies: PolicySpec[];
  call(i: number): Call;
  maxRequests: number;
  /** Requests sent at once per wave, and the time between waves, in ms. */
  parallel: number;
  intervalMs: number;
  /** Sleeps `Retry-After` plus jitter after a 429 instead of keeping its pace. */
  polite?: boolean;
  /** The route has `exposeDetails: false`: a 429 body must not give the wait. */
  hidesWait?: boolean;
}

const user = (id: string) => ({ 'x-user': id });
const perMinute = (limit: number, name = 'default'): PolicySpec => ({
  name,
  limit,
  periodMs: 60_000,
});

/**
 * The demo's cast. Identities carry the run id, so each run starts from full budgets even
 * on a Redis that remembers the previous one. The demo's traffic all comes from
 * 127.0.0.1 (the app does not believe `X-Forwarded-For`), so each per-IP budget has a
 * single client: the scraper on `/search`, the brute force on `/auth/login`.
 */
export function cast(run: string): ClientSpec[] {
  return [
    {
      name: 'scraper',
      route: 'GET /search, anonymous (per IP)',
      policies: [perMinute(30)],
      // Every third query asks for many filters, which costs 3.
      call: (i) =>
        i % 3 === 2
          ? { method: 'GET', path: `/search?q=p${i}&filters=a,b,c,d,e,f`, cost: 3 }
          : { method: 'GET', path: `/search?q=p${i}`, cost: 1 },
      maxRequests: 500,
      parallel: 5,
      intervalMs: 200,
    },
    {
      name: 'free-key',
      route: 'GET /api/items, free plan',
      policies: [perMinute(10)],
      call: () => ({
        method: 'GET',
        path: '/api/items',
        headers: { 'x-api-key': `free-key-${run}` },
        cost: 1,
      }),
      maxRequests: 60,
      parallel: 1,
      intervalMs: 400,
    },
    {
      name: 'pro-key',
      route: 'GET /api/items, pro plan',
      policies: [perMinute(100)],
      call: () => ({
        method: 'GET',
        path: '/api/items',
        headers: { 'x-api-key': `pro-key-${run}` },
        cost: 1,
      }),
      maxRequests: 400,
      parallel: 2,
      intervalMs: 100,
    },
    {
      name: 'brute-force',
      route: 'POST /auth/login, per IP',
      policies: [perMinute(5)],
      // A forged X-Forwarded-For per attempt: it must not buy a fresh budget.
      call: (i) => ({
        method: 'POST',
        path: '/auth/login',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': `203.0.113.${i % 250}` },
        body: JSON.stringify({ username: 'demo', password: `guess-${i}` }),
        cost: 1,
      }),
      maxRequests: 100,
      parallel: 1,
      intervalMs: 200,
      hidesWait: true,
    },
    {
      name: 'exporter',
      route: 'GET /reports/:id/export, cost 10',
      policies: [perMinute(60)],
      call: (i) => ({
        method: 'GET',
        path: `/reports/${i}/export`,
        headers: user(`exporter-${run}`),
        cost: 10,
      }),
      maxRequests: 40,
      parallel: 1,
      intervalMs: 500,
    },
    {
      name: 'mobile',
      route: 'GET /orders, bursts of 15',
      policies: [
        perMinute(300),
        { name: 'burst', limit: 10, periodMs: 1000 },
        { name: 'daily', limit: 5000, periodMs: 86_400_000 },
      ],
      call: () => ({ method: 'GET', path: '/orders', headers: user(`mobile-${run}`), cost: 1 }),
      maxRequests: 300,
      parallel: 15,
      intervalMs: 1000,
    },
    {
      name: 'polite',
      route: 'GET /search, honours Retry-After',
      policies: [perMinute(30)],
      call: (i) => ({
        method: 'GET',
        path: `/search?q=polite${i}`,
        headers: user(`polite-${run}`),
        cost: 1,
      }),
      maxRequests: 200,
      parallel: 1,
      intervalMs: 100,
      polite: true,
    },
  ];
}

/**
 * Runs one client against `base` for at most `durationMs`, and returns what it saw.
 * An impolite client sends a wave every `intervalMs` whatever the answers; the polite one
 * sends one request at a time and, after a 429, sleeps `Retry-After` seconds plus up to
 * 500 ms of jitter (so that many polite clients do not come back in the same instant).
 */
export async function drive(base: string, spec: ClientSpec, durationMs: number): Promise<Sample[]> {
  const samples: Sample[] = [];
  const start = performance.now();
  const deadline = start + durationMs;
  let sent = 0;
  for (let wave = 1; sent < spec.maxRequests && performance.now() < deadline; wave++) {
    const size = Math.min(spec.parallel, spec.maxRequests - sent);
    const calls = Array.from({ length: size }, () => spec.call(sent++));
    const answers = await Promise.all(calls.map((call) => send(base, call)));
    samples.push(...answers);
    // The impolite keep their schedule whatever the answers; the polite one paces itself.
    let next = spec.polite ? performance.now() + spec.intervalMs : start + wave * spec.intervalMs;
    const last = answers[answers.length - 1]!;
    if (spec.polite && last.status === 429) {
      const seconds = Number(last.retryAfter);
      // Without a usable Retry-After (the demo flags it), back off one second.
      const waitMs = (Number.isInteger(seconds) && seconds >= 1 ? seconds : 1) * 1000;
      next = performance.now() + waitMs + Math.random() * 500;
    }
    if (next >= deadline) break;
    await sleep(next - performance.now());
  }
  return samples;
}
