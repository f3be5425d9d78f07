import type { Trace } from '../../observability/observer.js';
import type { Route } from '../../plan/rules.js';
import type { Decide } from '../call.js';
import type { Engine } from '../engine.js';

/**
 * Observation around a step (`onDecision`, metrics, the active span's attributes): the step
 * runs as it would unobserved, on the same path, filling in a trace; once it has decided,
 * the trace goes to the observer and the span. Only routes of a module with `onDecision`,
 * `metrics` or tracing are wrapped.
 */
export function observed(engine: Engine, route: Route, decide: Decide): Decide {
  const { observer, tracing } = engine;
  if (observer === undefined && tracing === undefined) return decide;
  const first = (route.enforced[0] ?? route.shadowed[0])!.key;
  return (ctx, identities, _trace) => {
    // Undefined unless an OpenTelemetry SDK records a span for this request.
    const span = tracing?.activeSpan();
    if (observer === undefined && span === undefined) return decide(ctx, identities, undefined);
    const trace: Trace = { identity: '' };
    return decide(ctx, identities, trace).then((outcome) => {
      // Remembered per request: the key function has run already, and is not asked again.
      const identity = identities(first);
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
