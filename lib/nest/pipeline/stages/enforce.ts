import { performance } from 'node:perf_hooks';
import { RateLimitBackendError } from '../../../core/errors.js';
import type { LimitEntry, Spending } from '../../../core/limiter.js';
import type { Decision } from '../../../core/model/policy.js';
import type { Trace } from '../../observability/observer.js';
import type { Route } from '../../plan/rules.js';
import type { Engine } from '../engine.js';
import type { Entries, Entry } from './entries.js';
import type { RequestOutcome } from '../outcome.js';
import { storeFailed } from './store-failure.js';

/**
 * The enforce stage on the usual route, its fast path: fixed policies, identities known,
 * one store call, nothing else to wait for. Kept free of async functions, each of which
 * would add promises and microtask turns per request; an observed request takes the same
 * path and only fills `trace`.
 *
 * @param fixed the route's entries, every identity known (see `PolicyResolver.fixedEntries`)
 * @param failure what the route answers without its store (see `storeFailed`)
 */
export function enforceFixed(
  engine: Engine,
  route: Route,
  fixed: Entries,
  trace: Trace | undefined,
  failure: () => RequestOutcome,
): Promise<RequestOutcome> {
  const enforcing = fixed.entries;
  const entries = enforcing.map((e) => e.entry);
  const started = trace ? performance.now() : 0;
  return engine.limiter.consumeEach(entries).then(
    (decision) => {
      engine.insurance.storeAnswered();
      if (trace) traceAnswer(trace, entries, decision, started);
      const outcome = engine.shape.decided(decision, enforcing, route.name);
      if (!decision.leases) return outcome;
      // The spread last (the outcome has no `release`): on Node 20, properties added after a
      // spread cost microseconds each.
      return { release: engine.ends.releaser(route.name, decision.leases), ...outcome };
    },
    (error: unknown) => {
      if (trace) traceFailure(trace, entries, error, started);
      return storeFailed(engine, route, enforcing, error, failure);
    },
  );
}

/**
 * The enforce stage in general: one store call for `enforcing`, spending on a route that
 * counts by outcome (`count`: what the response later shows should not have counted is
 * given back by `settle`), consuming otherwise; slots of concurrency limits come back by
 * `release`. `answered` is false when the store did not answer and the on-store-failure
 * stage decided instead: then no later stage runs.
 */
export async function enforce(
  engine: Engine,
  route: Route,
  enforcing: readonly Entry[],
  trace: Trace | undefined,
  failure: () => RequestOutcome,
): Promise<{ outcome: RequestOutcome; answered: boolean }> {
  const entries = enforcing.map((e) => e.entry);
  const started = trace ? performance.now() : 0;
  try {
    let settle: ((status: number) => void) | undefined;
    let spending: Spending | undefined;
    let decision: Decision;
    if (route.counting) {
      const spent = await engine.limiter.spend(entries);
      decision = spent.decision;
      spending = spent.spending;
      if (spending) settle = engine.ends.settler(route.name, enforcing, spending);
    } else {
      decision = await engine.limiter.consumeEach(entries);
    }
    engine.insurance.storeAnswered();
    if (trace) traceAnswer(trace, entries, decision, started);
    let outcome = engine.shape.decided(decision, enforcing, route.name);
    // Spreads last, as in `enforceFixed`: the outcome has neither `settle` nor `release` yet.
    if (settle && outcome.allowed) outcome = { settle, spending, ...outcome };
    if (decision.leases)
      outcome = { release: engine.ends.releaser(route.name, decision.leases), ...outcome };
    return { outcome, answered: true };
  } catch (error) {
    if (trace) traceFailure(trace, entries, error, started);
    return {
      outcome: await storeFailed(engine, route, enforcing, error, failure),
      answered: false,
    };
  }
}

function traceAnswer(
  trace: Trace,
  entries: LimitEntry[],
  decision: Decision,
  started: number,
): void {
  // A deny-cache answer is no store call: it stays out of the store latency.
  if (!decision.cached) trace.enforcedMs = performance.now() - started;
  trace.enforcing = entries;
  trace.decision = decision;
}

function traceFailure(trace: Trace, entries: LimitEntry[], error: unknown, started: number): void {
  trace.enforcedMs = performance.now() - started;
  trace.enforcing = entries;
  if (!(error instanceof RateLimitBackendError)) {
    trace.enforcedError = 'error';
    return;
  }
  trace.enforcedError = error.kind;
  // Refused by what the process knows (see storeFailed): observed as the refusal it is.
  const known = error.refusal;
  if (known) {
    trace.enforcing = known.indexes.map((i) => entries[i]!);
    trace.decision = known.decision;
  }
}
