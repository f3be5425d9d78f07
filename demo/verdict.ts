import type { ClientSpec, PolicySpec } from './clients.js';
import type { Sample } from './traffic.js';

/** One client's numbers, for the table and the verdict. */
export interface Summary {
  sent: number;
  admitted: number;
  refused: number;
  /** Units spent by the admitted requests. */
  admittedUnits: number;
  /** The most units the policies allow over the elapsed time (see {@link allowedUnits}). */
  allowedUnits: number;
  elapsedMs: number;
  retryAfter: { min: number; max: number } | undefined;
  finalRemaining: number | undefined;
  /** Why the client fails; empty when it passes. */
  problems: string[];
}

/**
 * The most units a token bucket of `limit` per `periodMs` (capacity `limit`) can admit over
 * `elapsedMs`: the full bucket at the first decision, plus what refills until the last
 * one. `elapsedMs` runs from the client's first request sent to its last response
 * received, so it covers every decision the app made for it. The `+ 1` absorbs clock
 * granularity (the app's clock, or Redis's, counts whole ms; ours is finer). A bucket that
 * did not start full (a per-IP budget used before the run) only admits less.
 */
function allowedUnits(policy: PolicySpec, elapsedMs: number): number {
  return policy.limit + Math.floor((elapsedMs * policy.limit) / policy.periodMs) + 1;
}

/** `"name";q=<limit>;w=<seconds>`, as the app should announce the policy. */
const announced = (p: PolicySpec) => `"${p.name}";q=${p.limit};w=${Math.ceil(p.periodMs / 1000)}`;

/**
 * Summarises a client's samples and checks them: never more admitted than its policies
 * allow (every stacked policy must allow it, so the tightest bound holds), no 5xx or lost
 * request, a valid `Retry-After` (integer >= 1) on every 429 (except when the cost is above
 * a policy's capacity, which no wait can fix), the policies announced in `RateLimit-Policy`,
 * no wait in the body where the route hides it, and a polite client never refused twice
 * in a row.
 */
export function judge(spec: ClientSpec, samples: Sample[]): Summary {
  const problems: string[] = [];
  const admitted = samples.filter((s) => s.status !== 0 && s.status !== 429 && s.status < 500);
  const refused = samples.filter((s) => s.status === 429);
  const first = Math.min(...samples.map((s) => s.sentAt));
  const last = Math.max(...samples.map((s) => s.doneAt));
  const elapsedMs = samples.length ? last - first : 0;
  const admittedUnits = admitted.reduce((sum, s) => sum + s.cost, 0);
  const allowed = Math.min(...spec.policies.map((p) => allowedUnits(p, elapsedMs)));
  if (admittedUnits > allowed)
    problems.push(`admitted ${admittedUnits} units, more than the ${allowed} allowed`);

  const broken = samples.filter((s) => s.status === 0 || s.status >= 500);
  if (broken.length)
    problems.push(`${broken.length} answers were 5xx or lost (first: ${describe(broken[0]!)})`);

  const capacity = Math.min(...spec.policies.map((p) => p.limit));
  const badWaits = refused.filter(
    (s) => s.cost <= capacity && !/^[1-9]\d*$/.test(s.retryAfter ?? ''),
  );
  if (badWaits.length)
    problems.push(
      `${badWaits.length} 429s without a valid Retry-After (e.g. ${String(badWaits[0]!.retryAfter)})`,
    );

  const unannounced = samples.filter(
    (s) =>
      (s.status === 429 || admitted.includes(s)) &&
      !spec.policies.every((p) => s.policy?.includes(announced(p))),
  );
  if (unannounced.length)
    problems.push(
      `${unannounced.length} answers did not announce ${spec.policies.map(announced).join(', ')} (e.g. ${String(unannounced[0]!.policy)})`,
    );

  if (spec.hidesWait) {
    const leaky = refused.filter(
      (s) => typeof s.body !== 'object' || s.body === null || 'retryAfter' in s.body,
    );
    if (leaky.length) problems.push(`${leaky.length} 429 bodies gave the wait away`);
  }

  if (spec.polite) {
    const twice = samples.findIndex(
      (s, i) => i > 0 && s.status === 429 && samples[i - 1]!.status === 429,
    );
    if (twice >= 0)
      problems.push(`refused twice in a row (its requests #${twice} and #${twice + 1})`);
  }

  const waits = refused.map((s) => Number(s.retryAfter)).filter(Number.isFinite);
  const lastWithRemaining = [...samples].reverse().find((s) => s.remaining !== undefined);
  return {
    sent: samples.length,
    admitted: admitted.length,
    refused: refused.length,
    admittedUnits,
    allowedUnits: allowed,
    elapsedMs,
    retryAfter: waits.length ? { min: Math.min(...waits), max: Math.max(...waits) } : undefined,
    finalRemaining: lastWithRemaining?.remaining,
    problems,
  };
}

function describe(s: Sample): string {
  return s.status === 0 ? (s.error ?? 'no answer') : `${s.status} ${JSON.stringify(s.body)}`;
}
