/** Sending requests and remembering what came back. Times are `performance.now()` ms. */

/** One request a simulated client sends. */
export interface Call {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** Units the app should charge for it, per the sample app's policies. */
  cost: number;
}

/** What one request observed. */
export interface Sample {
  sentAt: number;
  doneAt: number;
  /** 0 when no response came (connection error, timeout). */
  status: number;
  cost: number;
  /** The raw `Retry-After` header, or null. */
  retryAfter: string | null;
  /** `X-RateLimit-Remaining`, else the lowest `r=` of `RateLimit`. */
  remaining?: number;
  /** The raw `RateLimit-Policy` header, or null. */
  policy: string | null;
  /** The parsed body of a 429 or 5xx. */
  body?: unknown;
  error?: string;
}

/** Longest wait for one response: a hung app must fail the demo, not stall it. */
const TIMEOUT_MS = 5000;

/**
 * Sends one call to `base` and records the outcome; never throws (a failure is a sample
 * with status 0 and the error).
 */
export async function send(base: string, call: Call): Promise<Sample> {
  const sentAt = performance.now();
  const common = { sentAt, cost: call.cost, retryAfter: null, policy: null };
  try {
    const response = await fetch(`${base}${call.path}`, {
      method: call.method,
      headers: call.headers,
      body: call.body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const text = await response.text();
    const { headers, status } = response;
    return {
      ...common,
      doneAt: performance.now(),
      status,
      retryAfter: headers.get('retry-after'),
      remaining: remainingOf(headers),
      policy: headers.get('ratelimit-policy'),
      body: status === 429 || status >= 500 ? parse(text) : undefined,
    };
  } catch (error) {
    return { ...common, doneAt: performance.now(), status: 0, error: String(error) };
  }
}

function remainingOf(headers: Headers): number | undefined {
  const legacy = headers.get('x-ratelimit-remaining');
  if (legacy !== null) return Number(legacy);
  const rs = [...(headers.get('ratelimit') ?? '').matchAll(/;r=(\d+)/g)].map((m) => Number(m[1]));
  return rs.length ? Math.min(...rs) : undefined;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Resolves after `ms` (a client's own pacing, not a wait for the app). */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
