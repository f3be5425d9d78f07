import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { NEST_METADATA } from '../../declare/metadata.js';

/**
 * Per-user limits behind a route's own authentication guard.
 *
 * Nest runs global guards first, so the module's guard meets `@UseGuards(AuthGuard('jwt'))`
 * routes before any user is known. On such routes it decides only the policies whose key
 * needs no user (an IP-keyed login limit is still refused before any password check), and
 * leaves the others to {@link AFTER_ROUTE_GUARDS}, which the module appends to the route's
 * own guards at bootstrap, so that Nest runs it after them.
 *
 * Those others are not free for a client the guards refuse: before the guards, the global
 * guard spends them against the client's address (budgets of their own), and the appended
 * guard gives that back when the guards admitted the request. So failed authentication is
 * limited per address, requests in flight together included, while authenticated users are
 * limited per user, each their own budget.
 */

/** Marks the guards of this package (and subclasses): not the route's own guards. */
export const RATE_LIMIT_GUARD = Symbol.for('nest-rate-limit:guard');

// A registered symbol: the work a CommonJS copy of the package left on a request is found
// by an ESM copy's marker too.
const AFTER_GUARDS = Symbol.for('nest-rate-limit:after-guards');

type Later = (ctx: ExecutionContext) => Promise<boolean>;
type Carrier = { [AFTER_GUARDS]?: Later };

/** Whether `guard` (a class or an instance in `@UseGuards`) is one of ours. */
export function isRateLimitGuard(guard: unknown): boolean {
  if (guard === AFTER_ROUTE_GUARDS) return true;
  const marked = typeof guard === 'function' ? (guard as { prototype?: unknown }).prototype : guard;
  return (
    (marked as { [RATE_LIMIT_GUARD]?: boolean } | null | undefined)?.[RATE_LIMIT_GUARD] === true
  );
}

/** Leaves `later` on the call's carrier for {@link AFTER_ROUTE_GUARDS}. */
export function decideAfterGuards(carrier: object, later: Later): void {
  (carrier as Carrier)[AFTER_GUARDS] = later;
}

/**
 * The guard appended to the routes whose policies wait for authentication. One object for
 * every app in the process (several apps may share a controller class, and so its
 * metadata): it runs what the app's own guard left on the request, or admits.
 */
const AFTER_ROUTE_GUARDS: CanActivate = {
  canActivate(ctx: ExecutionContext): boolean | Promise<boolean> {
    const carrier = ctx.getArgByIndex<Carrier | undefined>(0);
    const later = carrier?.[AFTER_GUARDS];
    if (later === undefined) return true;
    delete carrier![AFTER_GUARDS];
    return later(ctx);
  },
};

/**
 * Appends {@link AFTER_ROUTE_GUARDS} to a handler's own guards, once. Runs before Nest
 * builds its routes (which read the guards then), from a provider of the module.
 */
export function appendAfterRouteGuards(handler: object): void {
  const guards =
    (Reflect.getOwnMetadata(NEST_METADATA.guards, handler) as unknown[] | undefined) ?? [];
  if (guards.includes(AFTER_ROUTE_GUARDS)) return;
  Reflect.defineMetadata(NEST_METADATA.guards, [...guards, AFTER_ROUTE_GUARDS], handler);
}
