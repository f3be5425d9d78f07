import type { Spending } from '../../core/limiter.js';
import type { Decision } from '../../core/model/policy.js';
import type { HeaderPolicy } from '../../http/headers.js';
import type { Refusal } from '../transports/refusal.js';

/**
 * What the guard decided for one request (or one GraphQL field, WebSocket message, RPC
 * call): stored on the transport's carrier, so a call guarded twice counts once.
 */
export interface RequestOutcome {
  /** Admit the request. */
  readonly allowed: boolean;
  /** Informational headers to send (empty in shadow mode or when the store failed). */
  readonly headers: Record<string, string>;
  /**
   * When refused: status 429 (limited) or 503 (a fail-closed policy's store is down), the
   * wait in **seconds**, the message and the refusing policies, before any transport renders
   * it (see `Refusal`): the call's transport turns it into an HTTP body, a GraphQL error, a
   * `WsException` or an `RpcException`.
   */
  readonly refusal?: Refusal;
  /** The enforced decision, when the store answered. */
  readonly decision?: Decision;
  /** The policies the headers describe (those that send headers), as the store decided them. */
  readonly shown?: readonly HeaderPolicy[];
  /**
   * On a route that counts by outcome (`count`), when something was spent: gives back what
   * the response's status says should not have counted. Called once the response is sent.
   */
  readonly settle?: (status: number) => void;
  /**
   * What the call spent, beside `settle`: for a caller that gives back part of it itself
   * (a GraphQL operation's budget, refunded down to the operation's actual cost).
   */
  readonly spending?: Spending;
  /**
   * Under concurrency limits, when slots were taken: gives them back (once, however often
   * called), resolving once the store has answered or failed for good; never rejects. Held
   * by the call's `SlotHold` (see `slot-hold.ts`), which calls it when the handler's result
   * settles, or when the call ends without the handler.
   */
  readonly release?: () => Promise<void>;
}

/** Admitted without a decision: no policy, skipped, or failed open. */
export const NO_LIMIT: RequestOutcome = { allowed: true, headers: {} };

// A registered symbol: a request guarded by a CommonJS and an ESM copy of the package is
// still counted once.
const STORED = Symbol.for('nest-rate-limit:outcome');

type Carrier = { [STORED]?: RequestOutcome | Promise<RequestOutcome> };

/** The outcome the guard stored on `carrier`, once decided. */
export function storedOutcome(carrier: object): RequestOutcome | undefined {
  const stored = (carrier as Carrier)[STORED];
  return stored instanceof Promise ? undefined : stored;
}

/**
 * The outcome the guard stored on `carrier`, or the promise of it while the guard is still
 * deciding: calls that share a carrier at once (the items of a GraphQL list) wait for the
 * one decision instead of making their own.
 */
export function storedDecision(
  carrier: object,
): RequestOutcome | Promise<RequestOutcome> | undefined {
  return (carrier as Carrier)[STORED];
}

/** Stores the outcome (or its promise) on the carrier itself, so nothing outlives the request. */
export function storeOutcome(
  carrier: object,
  outcome: RequestOutcome | Promise<RequestOutcome>,
): void {
  (carrier as Carrier)[STORED] = outcome;
}

/** Forgets the outcome stored on `carrier`: the call is decided afresh. */
export function forgetOutcome(carrier: object): void {
  delete (carrier as Carrier)[STORED];
}

// The route an outcome decided before the body (`includeUpload`) was made for.
const DECIDED_FOR = Symbol.for('nest-rate-limit:decided-for');

type Route = { type: object; handler: object };

/** Records that the outcome stored on `carrier` was decided for `handler` of `type`. */
export function markDecidedFor(carrier: object, type: object, handler: object): void {
  (carrier as { [DECIDED_FOR]?: Route })[DECIDED_FOR] = { type, handler };
}

/**
 * False when the outcome on `carrier` was decided before the body for another route than
 * `handler` of `type` (the one Nest dispatches to), and forgets that mark; else true.
 */
export function decidedFor(carrier: object, type: object, handler: object): boolean {
  const route = (carrier as { [DECIDED_FOR]?: Route })[DECIDED_FOR];
  if (route === undefined || (route.type === type && route.handler === handler)) return true;
  delete (carrier as { [DECIDED_FOR]?: Route })[DECIDED_FOR];
  return false;
}
