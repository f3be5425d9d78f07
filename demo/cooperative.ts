/**
 * The cooperative client (`nest-rate-limit/client`) beside a plain `fetch`: the same burst of
 * requests to `GET /orders` (10/s per user), once through each, as two users of their own.
 * Through the client no 429 reaches the caller; through `fetch` most of the burst is refused.
 */
import { createRateLimitedFetch } from 'nest-rate-limit/client';

export interface Burst {
  label: string;
  sent: number;
  /** 200s the caller got. */
  ok: number;
  /** 429s the server sent (the client's retries included). */
  refusedByServer: number;
  /** 429s that reached the caller. */
  refusedToCaller: number;
  ms: number;
}

const BURST = 25;

async function burst(
  label: string,
  send: typeof fetch,
  count: () => number,
  url: string,
  user: string,
) {
  const started = performance.now();
  const statuses = await Promise.all(
    Array.from({ length: BURST }, () =>
      send(url, { headers: { 'x-user': user } }).then(
        (r) => r.status,
        () => 429,
      ),
    ),
  );
  return {
    label,
    sent: BURST,
    ok: statuses.filter((s) => s === 200).length,
    refusedByServer: count(),
    refusedToCaller: statuses.filter((s) => s === 429).length,
    ms: Math.round(performance.now() - started),
  } satisfies Burst;
}

/** Both bursts, one after the other. */
export async function cooperativeBursts(base: string, run: string): Promise<Burst[]> {
  let seen = 0;
  const counted: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (response.status === 429) seen++;
    return response;
  };
  const client = createRateLimitedFetch({ fetch: counted });
  const url = `${base}/orders`;
  const through = await burst('nest-rate-limit/client', client, () => seen, url, `coop-${run}`);
  seen = 0;
  const plain = await burst('plain fetch', counted, () => seen, url, `plain-${run}`);
  return [through, plain];
}

/** One line per burst, and whether the client kept every 429 from its caller. */
export function renderBursts(bursts: Burst[]): { lines: string[]; passed: boolean } {
  const lines = bursts.map(
    (b) =>
      `${b.label.padEnd(22)} ${b.sent} requests at once to GET /orders (10/s): ${b.ok} × 200, ` +
      `${b.refusedToCaller} × 429 to the caller (${b.refusedByServer} sent by the server), ${b.ms} ms`,
  );
  const [client, plain] = bursts;
  const passed =
    client!.ok === client!.sent && client!.refusedToCaller === 0 && plain!.refusedToCaller > 0;
  return { lines, passed };
}
