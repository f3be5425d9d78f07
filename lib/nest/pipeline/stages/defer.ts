import type { ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError } from '../../../core/errors.js';
import { decideAfterGuards } from './after-route-guards.js';
import type { Call, Deferred, StageRun, StepSpec } from '../call.js';
import { deliver } from './deliver.js';
import type { StageServices } from '../services.js';
import { andThen } from '../thenable.js';
import { identitiesOf } from './identify.js';
import { endSlots, holdSlots } from '../../end/slot-hold.js';
import { NO_LIMIT, storeOutcome, type RequestOutcome } from '../outcome.js';

/** The status `settle` is given for a request the route's own guards admitted (see `count`). */
const ADMITTED = 200;

/**
 * The defer stage, on an HTTP route with guards of its own whose policies need the user (see
 * `after-route-guards.ts`), around the rest of the route's first step: once that admitted,
 * the policies that wait are spent now against the client's address, as a request the guards
 * might refuse; once the guards have admitted it, that is given back and they are decided
 * per user, with headers over every policy of the request. Only on such a route's first
 * step, and only in the guard (a call to hand the later decision to).
 */
export function deferStage(step: StepSpec, services: StageServices): StageRun | undefined {
  const deferred = step.deferred;
  if (deferred === undefined) return undefined;
  return (state, next) => {
    const call = state.call;
    if (call === undefined) return next(state);
    return andThen(next(state), (first) =>
      first.allowed ? deferToRouteGuards(services, call, deferred, first) : first,
    );
  };
}

/**
 * Spends the address budgets now, and leaves the per-user decision to the guard appended
 * after the route's own.
 * @param first the outcome of the policies decided before the route's guards
 * @returns the outcome to answer now
 */
async function deferToRouteGuards(
  services: StageServices,
  call: Call,
  deferred: Deferred,
  first: RequestOutcome,
): Promise<RequestOutcome> {
  const { ctx, request, plan } = call;
  const identities = identitiesOf(ctx, request, plan.name, services.options, services.events);
  const held = await deferred.address.decide(ctx, identities);
  if (!held.allowed) return services.shape.combine(first, held);
  decideAfterGuards(call.carrier, (after) => {
    // The guards admitted it: not a refused request after all.
    held.settle?.(ADMITTED);
    return decideLater(services, call, deferred, after, first);
  });
  return first;
}

/** The per-user policies, decided once the route's own guards have run. */
async function decideLater(
  services: StageServices,
  call: Call,
  deferred: Deferred,
  ctx: ExecutionContext,
  first: RequestOutcome,
): Promise<boolean> {
  const { transport, plan, carrier } = call;
  let second = NO_LIMIT;
  try {
    // The user is known now: identities anew, from the request as the guards left it.
    const identities = identitiesOf(
      ctx,
      transport.request(ctx),
      plan.name,
      services.options,
      services.events,
    );
    second = await deferred.user.decide(ctx, identities);
  } catch (error) {
    if (error instanceof RateLimitConfigError) throw error;
    services.events.configError(`transport ${transport.type}`, error);
  }
  const outcome = services.shape.combine(first, second);
  if (outcome.allowed && second.settle) transport.onSent?.(ctx, second.settle);
  if (second.release) holdSlots(ctx, transport, carrier, second.release);
  storeOutcome(carrier, outcome);
  // Refused per user: the slots taken before the route's guards go back before the refusal.
  if (!outcome.allowed) await endSlots(carrier);
  deliver(ctx, transport, outcome, services.events, call.refuse);
  return true;
}
