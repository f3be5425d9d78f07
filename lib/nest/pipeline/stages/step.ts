import type { ExecutionContext } from '@nestjs/common';
import type { Trace } from '../../observability/observer.js';
import type { Route } from '../../plan/rules.js';
import type { Engine } from '../engine.js';
import type { Entries } from './entries.js';
import { enforce } from './enforce.js';
import type { IdentityOf } from './identify.js';
import { NO_LIMIT, type RequestOutcome } from '../outcome.js';
import { countShadow } from './shadow.js';

/**
 * The stages of one step in general, in order: entries (resolving rate and cost
 * functions) → enforce → on store failure → shadow → shape. A route with fixed policies and
 * no shadow or `count` policy takes `enforceFixed` instead (see `plan/compile.ts`).
 *
 * @param fixed the entries when every identity was known at once, to reuse
 */
export async function decideInStages(
  engine: Engine,
  ctx: ExecutionContext | undefined,
  route: Route,
  identities: IdentityOf,
  trace: Trace | undefined,
  failure: () => RequestOutcome,
  fixed?: Entries,
): Promise<RequestOutcome> {
  const { entries: enforcing, broken } =
    fixed ?? (await engine.entries.entriesOf(ctx, route, route.enforced, identities));
  // A policy left with no entry (its rate function never answered, or it is fail-closed and
  // its cost function threw) refuses as a fail-closed policy does when its store is down:
  // left out, it would lift its limit for whoever makes the function throw. Except an address
  // budget (of requests a route's guards refuse), spent before any user is known, which a
  // rate function may need: its own policy still applies, after the guards.
  if (broken.length > 0 && broken.some((r) => r.addressBurst === undefined)) {
    if (trace) trace.brokenClosed = true;
    return engine.shape.unavailable();
  }
  let outcome: RequestOutcome = NO_LIMIT;
  if (enforcing.length > 0) {
    const enforced = await enforce(engine, route, enforcing, trace, failure);
    if (!enforced.answered) return enforced.outcome;
    outcome = enforced.outcome;
  }
  // The shadow stage: shadow policies count only what the enforced ones let through, in a
  // call of their own, so a would-be denial never blocks the request.
  if (outcome.allowed && route.shadowed.length > 0) {
    const { entries } = await engine.entries.entriesOf(ctx, route, route.shadowed, identities);
    const leases = await countShadow(engine.limiter, engine.events, entries, route.name, trace);
    // Shadow slots are held like enforced ones, so the would-be refusals are real ones.
    if (leases)
      outcome = engine.ends.withRelease(outcome, engine.ends.releaser(route.name, leases));
  }
  return outcome;
}
