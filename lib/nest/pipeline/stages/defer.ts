import type { ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError } from '../../../core/errors.js';
import { decideAfterGuards } from './after-route-guards.js';
import type { Call } from '../call.js';
import { deliver } from './deliver.js';
import type { Engine } from '../engine.js';
import { identitiesOf } from './identify.js';
import { endSlots, holdSlots } from '../../end/slot-hold.js';
import { NO_LIMIT, storeOutcome, type RequestOutcome } from '../outcome.js';

/** The status `settle` is given for a request the route's own guards admitted (see `count`). */
const ADMITTED = 200;

/**
 * The deferral stage, on an HTTP route with guards of its own whose policies need the user
 * (see `after-route-guards.ts`): those policies are spent now against the client's address,
 * as a request the guards might refuse; once the guards have admitted it, that is given
 * back and they are decided per user, with headers over every policy of the request.
 *
 * @param first the outcome of the policies decided before the route's guards
 * @returns the outcome to answer now
 */
export async function deferToRouteGuards(
  engine: Engine,
  call: Call,
  first: RequestOutcome,
  refuse: (ctx: ExecutionContext, outcome: RequestOutcome) => never,
): Promise<RequestOutcome> {
  const { ctx, request, plan } = call;
  const deferred = plan.deferred!;
  const identities = identitiesOf(ctx, request, plan.name, engine.options, engine.events);
  const held = await deferred.address(ctx, identities, undefined);
  if (!held.allowed) return engine.shape.combine(first, held);
  decideAfterGuards(call.carrier, (after) => {
    // The guards admitted it: not a refused request after all.
    held.settle?.(ADMITTED);
    return decideLater(engine, call, after, first, refuse);
  });
  return first;
}

/** The per-user policies, decided once the route's own guards have run. */
async function decideLater(
  engine: Engine,
  call: Call,
  ctx: ExecutionContext,
  first: RequestOutcome,
  refuse: (ctx: ExecutionContext, outcome: RequestOutcome) => never,
): Promise<boolean> {
  const { transport, plan, carrier } = call;
  let second = NO_LIMIT;
  try {
    // The user is known now: identities anew, from the request as the guards left it.
    const identities = identitiesOf(
      ctx,
      transport.request(ctx),
      plan.name,
      engine.options,
      engine.events,
    );
    second = await plan.deferred!.user(ctx, identities, undefined);
  } catch (error) {
    if (error instanceof RateLimitConfigError) throw error;
    engine.events.configError(`transport ${transport.type}`, error);
  }
  const outcome = engine.shape.combine(first, second);
  if (outcome.allowed && second.settle) transport.onSent?.(ctx, second.settle);
  if (second.release) holdSlots(ctx, transport, carrier, second.release);
  storeOutcome(carrier, outcome);
  // Refused per user: the slots taken before the route's guards go back before the refusal.
  if (!outcome.allowed) await endSlots(carrier);
  deliver(ctx, transport, outcome, engine.events, refuse);
  return true;
}
