import { needsUser } from '../declare/keys.js';
import { NEST_METADATA } from '../declare/metadata.js';
import { isRateLimitGuard } from '../pipeline/after-route-guards.js';
import type { Route } from '../plan/rules.js';
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
  if (!DECIDED_FIRST.has(handler.kind)) return undefined;
  const own = [handler.type, handler.method].flatMap(
    (target) => (Reflect.getMetadata(NEST_METADATA.guards, target) as unknown[] | undefined) ?? [],
  );
  if (!own.some((guard) => !isRateLimitGuard(guard))) return undefined;
  const userPolicies = [...route.enforced, ...route.shadowed].filter((r) => needsUser(r.key));
  if (userPolicies.length === 0) return undefined;
  const names = [...new Set(userPolicies.map((r) => r.name))].join(', ');
  const where =
    handler.kind === 'ws'
      ? 'in handleConnection, on the socket'
      : 'in middleware or in the GraphQL context function (set req.user before resolvers run)';
  return (
    `its policies ${names} key by the user, but the global rate-limit guard decides them before ` +
    `this handler's own guards, so a user those guards set is not known yet and the client ` +
    `address is used instead: authenticate ${where}, or key these policies by something ` +
    `else (keys.withoutUser)`
  );
}
