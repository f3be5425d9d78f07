import { performance } from 'node:perf_hooks';
import { RateLimitBackendError } from '../../../core/errors.js';
import type { LimitEntry } from '../../../core/limiter.js';
import type { Decision } from '../../../core/model/policy.js';
import type { Trace } from '../../observability/observer.js';
import type { Answer, StageRun, StepSpec } from '../call.js';
import type { StageServices } from '../services.js';

/**
 * The enforce stage: one store call for the step's entries, all-or-nothing. Consumes, or on
 * a route that counts by outcome (`count`) spends, so that what the response later shows
 * should not have counted can be given back (`settle`). Leaves the store's decision (or its
 * failure) to the store-failure and shape stages; an observed request takes the same path
 * and only fills `trace`.
 */
export function enforceStage(step: StepSpec, services: StageServices): StageRun | undefined {
  if (step.route.enforced.length === 0) return undefined;
  const { limiter, insurance } = services;
  const spends = step.route.counting;
  return (state, next) => {
    const entries = state.entries!.entries.map((e) => e.entry);
    // Every policy was left out (address budgets whose rate functions failed): nothing to ask.
    if (entries.length === 0) return next(state);
    const trace = state.trace;
    const started = trace ? performance.now() : 0;
    const answered = (decision: Decision): Answer => {
      insurance.storeAnswered();
      if (trace) traceAnswer(trace, entries, decision, started);
      state.decision = decision;
      return next(state);
    };
    const failed = (error: unknown): Answer => {
      if (trace) traceFailure(trace, entries, error, started);
      state.failed = true;
      state.error = error;
      return next(state);
    };
    if (!spends) return limiter.consumeEach(entries).then(answered, failed);
    return limiter.spend(entries).then((spent) => {
      state.spending = spent.spending;
      return answered(spent.decision);
    }, failed);
  };
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
