import type { Trace } from '../../observability/observer.js';
import type { StageRun, StepSpec } from '../call.js';
import type { StageServices } from '../services.js';
import { andThen } from '../thenable.js';

/**
 * The observe stage, around the stages after it (`onDecision`, metrics, the active span's
 * attributes): they run as they would unobserved, on the same path, filling in a trace;
 * once they have answered, the trace goes to the observer and the span. Only on the steps
 * of a module with `onDecision`, `metrics` or tracing, and never on the address step (a
 * request is observed once, when its user policies are decided).
 */
export function observeStage(step: StepSpec, services: StageServices): StageRun | undefined {
  const { observer, tracing } = services;
  const { route } = step;
  const first = (route.enforced[0] ?? route.shadowed[0])?.key;
  if (!step.observed || first === undefined) return undefined;
  if (observer === undefined && tracing === undefined) return undefined;
  return (state, next) => {
    // Undefined unless an OpenTelemetry SDK records a span for this request.
    const span = tracing?.activeSpan();
    if (observer === undefined && span === undefined) return next(state);
    const trace: Trace = { identity: '' };
    state.trace = trace;
    return andThen(next(state), (outcome) => {
      // Remembered per request: the key function has run already, and is not asked again.
      const identity = state.identities(first);
      const finish = (raw: string) => {
        trace.identity = raw;
        observer?.finish(route.name, trace, outcome.allowed);
        if (span) tracing!.annotate(span, trace, outcome.allowed);
        return outcome;
      };
      return typeof identity === 'string' ? finish(identity) : identity.then(finish);
    });
  };
}
