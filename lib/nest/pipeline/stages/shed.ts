import type { ExecutionContext } from '@nestjs/common';
import type { Ticket } from '../../../core/overload/admission.js';
import type { Overload } from '../../overload/runtime.js';
import type { OverloadRoute } from '../../overload/routes.js';
import type { Transport } from '../../transports/transport.js';
import type { RequestOutcome } from '../outcome.js';
import { isThenable } from '../thenable.js';

const DONE = Promise.resolve();

/**
 * The shed stage, before the gate and every store call, only under the `overload` option:
 * admits the call by priority against its pool's adaptive limit, then runs `decide` (the
 * rate limits); or answers the shed call's 503 at once, so a shed call spends no rate-limit
 * budget. An admitted call's latency is sampled from the end of `decide` to the end of the
 * call; a call the rate limits refuse gives its slot back unsampled. On HTTP the slot is
 * given back when the response closes (sent, or its client gone), which the transport tells
 * without an interceptor on the route; on the other transports it joins the outcome's
 * `release`, held like a concurrency slot (`slot-hold.ts`) until the handler's result
 * settles. `@SkipLoadShedding` routes go straight to `decide`.
 */
export function shed(
  overload: Overload,
  ctx: ExecutionContext,
  transport: Transport,
  decide: () => Promise<RequestOutcome>,
): Promise<RequestOutcome> {
  let route: OverloadRoute;
  try {
    route = overload.routes.of(ctx);
  } catch {
    // A context without a class or handler: the rate limits' own stages say what it is.
    return decide();
  }
  if (route.exempt || nestedField(ctx)) return decide();
  const priority = overload.priorityOf(route, ctx);
  const admitted = overload.protection.acquire(priority, route.pool);
  if (admitted === undefined) return Promise.resolve(overload.shed(route, priority));
  if (isThenable(admitted)) {
    return admitted.then((ticket) =>
      ticket === undefined ? overload.shed(route, priority) : held(ticket, ctx, transport, decide),
    );
  }
  return held(admitted, ctx, transport, decide);
}

/**
 * A GraphQL field below the operation's root (a `@ResolveField` guarded under
 * `fieldResolverEnhancers: ['guards']`): its operation was admitted at its root field, and
 * no interceptor runs on field resolvers to give a slot of its own back.
 */
function nestedField(ctx: ExecutionContext): boolean {
  if (ctx.getType<string>() !== 'graphql') return false;
  const info = ctx.getArgByIndex<{ path?: { prev?: unknown } } | undefined>(3);
  return info?.path?.prev !== undefined;
}

/** `decide`'s outcome, holding `ticket` until the call ends. */
function held(
  ticket: Ticket,
  ctx: ExecutionContext,
  transport: Transport,
  decide: () => Promise<RequestOutcome>,
): Promise<RequestOutcome> {
  let decided: Promise<RequestOutcome>;
  try {
    decided = decide();
  } catch (error) {
    ticket.drop();
    return Promise.reject(error as Error);
  }
  return decided.then(
    (outcome) => {
      if (!outcome.allowed) {
        ticket.drop();
        return outcome;
      }
      ticket.restart();
      if (transport.onDone !== undefined) {
        // Every end of an HTTP call closes its response, so no interceptor (an RxJS
        // pipeline per call) is needed to see it. A client that leaves while its handler
        // runs gives the slot back as it leaves: the handler's own end is not seen.
        transport.onDone(ctx, () => ticket.end());
        return outcome;
      }
      const first = outcome.release;
      return {
        ...outcome,
        release: first
          ? () => {
              ticket.end();
              return first();
            }
          : () => {
              ticket.end();
              return DONE;
            },
      };
    },
    (error: unknown) => {
      ticket.drop();
      throw error;
    },
  );
}
