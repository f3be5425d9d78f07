import { needsUser } from '../declare/keys.js';
import { NEST_METADATA } from '../declare/metadata.js';
import { isRateLimitGuard } from '../pipeline/after-route-guards.js';
import type { Route, Rule } from '../plan/rules.js';
import type { Handler } from './handlers.js';

/** Kinds whose per-user policies are decided before the handler's own guards, never after. */
const DECIDED_FIRST = new Set(['graphql', 'graphql-field', 'ws']);

/**
 * The reason to report a resolver or gateway handler whose policies need the user but are
 * decided before its own guards: Nest runs the module's global guard first, and only HTTP
 * routes wait for theirs (see `pipeline/after-route-guards.ts`), so a user that an
 * authentication guard there sets is not known yet: the policy keys by the client address,
 * and every user gets the anonymous budget (a pro user the free tier). Undefined when none.
 */
export function userBeforeGuardsReason(handler: Handler, route: Route): string | undefined {
  if (!hasOwnGuards(handler)) return undefined;
  const names = userPolicyNames([...route.enforced, ...route.shadowed]);
  if (names === undefined) return undefined;
  return (
    `its ${names} keyed by the user, decided by the global rate-limit guard before this ` +
    `handler's own guards: a user those guards set is not known yet, so the client address ` +
    `is used instead. Authenticate ${where(handler)}, or key by something else ` +
    `(keys.withoutUser)`
  );
}

/**
 * The reason to report a GraphQL operation budget (the module's `graphql` option) keyed by
 * the user in an app where some resolver authenticates with a guard of its own: the budget
 * is charged before any resolver or guard runs. Undefined when none.
 * @param handlers every handler of the app; `rules` the budget's
 */
export function budgetBeforeGuardsReason(
  handlers: readonly Handler[],
  rules: readonly Rule[],
): string | undefined {
  const names = userPolicyNames(rules);
  if (names === undefined) return undefined;
  const guarded = handlers.filter((h) => h.kind.startsWith('graphql') && hasOwnGuards(h));
  if (guarded.length === 0) return undefined;
  const shown = guarded.slice(0, 3).map((h) => h.route);
  if (guarded.length > 3) shown.push(`${guarded.length - 3} more`);
  return (
    `the GraphQL budget's ${names} keyed by the user, charged before any resolver runs, ` +
    `while ${shown.join(', ')} authenticate${guarded.length === 1 ? 's' : ''} with guards of ` +
    `${guarded.length === 1 ? 'its' : 'their'} own: the user they set is not known yet, so ` +
    `the budget keys by the client address. Authenticate ${where(guarded[0]!)}`
  );
}

function hasOwnGuards(handler: Handler): boolean {
  if (!DECIDED_FIRST.has(handler.kind)) return false;
  const own = [handler.type, handler.method].flatMap(
    (target) => (Reflect.getMetadata(NEST_METADATA.guards, target) as unknown[] | undefined) ?? [],
  );
  return own.some((guard) => !isRateLimitGuard(guard));
}

/** `policy "a" is` or `policies "a", "b" are`, of the rules keyed by the user; undefined when none. */
function userPolicyNames(rules: readonly Rule[]): string | undefined {
  const names = [...new Set(rules.filter((r) => needsUser(r.key)).map((r) => `"${r.name}"`))];
  if (names.length === 0) return undefined;
  return names.length === 1 ? `policy ${names[0]!} is` : `policies ${names.join(', ')} are`;
}

function where(handler: Handler): string {
  return handler.kind === 'ws'
    ? 'in handleConnection, on the socket'
    : 'in middleware or in the GraphQL context function (set req.user before resolvers run)';
}
