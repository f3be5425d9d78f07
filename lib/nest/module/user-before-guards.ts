import { NEST_METADATA } from '../declare/metadata.js';
import { isRateLimitGuard } from '../pipeline/stages/after-route-guards.js';
import { readsUser } from '../plan/routes.js';
import type { Route, Rule } from '../plan/rules.js';
import type { Handler } from './handlers.js';

/** Kinds whose per-user policies are decided before the handler's own guards, never after. */
const DECIDED_FIRST = new Set(['graphql', 'graphql-field', 'ws']);

/** What the app's global guards registered after the module's are, in a warning. */
const LATER_GLOBAL_GUARDS =
  "the app's global guards registered after it (an APP_GUARD of a module imported after " +
  'RateLimitModule, or app.useGlobalGuards)';

/**
 * The reason to report a resolver or gateway handler whose policies may read the user (a key,
 * rate, cost or `byTier` plan function not marked with `keys.withoutUser`) but are decided
 * before the guards that set it: Nest runs the module's global guard first, and only HTTP
 * routes wait for the handler's own guards and for global guards registered after the
 * module's (see `pipeline/stages/after-route-guards.ts`), so the user is not known yet: the policy
 * keys by the client address, and a plan function sees no user (a pro user gets the free
 * tier). Undefined when none.
 * @param globalGuardsAfter whether the app runs global guards of its own after the module's
 */
export function userBeforeGuardsReason(
  handler: Handler,
  route: Route,
  globalGuardsAfter: boolean,
): string | undefined {
  if (!DECIDED_FIRST.has(handler.kind)) return undefined;
  const own = hasOwnGuards(handler);
  if (!own && !globalGuardsAfter) return undefined;
  const names = userPolicyNames([...route.enforced, ...route.shadowed]);
  if (names === undefined) return undefined;
  return (
    `its ${names} the user, decided by the global rate-limit guard before ` +
    `${own ? "this handler's own guards" : LATER_GLOBAL_GUARDS}: a user those guards set is ` +
    `not known yet, so the client address is used instead and a plan function sees no user. ` +
    `Authenticate ${where(handler)}` +
    `${own ? '' : ", or import that guard's module before RateLimitModule"}` +
    `, or mark each function that reads no user with keys.withoutUser`
  );
}

/**
 * The reason to report a GraphQL operation budget (the module's `graphql` option) that may
 * read the user in an app where some resolver authenticates with a guard of its own, or that
 * runs global guards of its own: the budget is charged before any resolver or guard runs
 * (the Apollo plugin, the Mercurius hooks), so only middleware or the GraphQL context
 * function can set the user in time. Undefined when none.
 * @param handlers every handler of the app; `rules` the budget's; `globalGuards` whether the
 *   app runs global guards of its own
 */
export function budgetBeforeGuardsReason(
  handlers: readonly Handler[],
  rules: readonly Rule[],
  globalGuards: boolean,
): string | undefined {
  const names = userPolicyNames(rules);
  if (names === undefined) return undefined;
  const resolvers = handlers.filter((h) => h.kind.startsWith('graphql'));
  if (resolvers.length === 0) return undefined;
  const guarded = resolvers.filter(hasOwnGuards);
  if (guarded.length === 0 && !globalGuards) return undefined;
  const shown = guarded.slice(0, 3).map((h) => h.route);
  if (guarded.length > 3) shown.push(`${guarded.length - 3} more`);
  const who =
    guarded.length === 0
      ? "the app's global guards (an APP_GUARD, or app.useGlobalGuards) run only when a " +
        'resolver does'
      : `${shown.join(', ')} authenticate${guarded.length === 1 ? 's' : ''} with guards of ` +
        `${guarded.length === 1 ? 'its' : 'their'} own`;
  return (
    `the GraphQL budget's ${names} the user, charged before any resolver runs, while ${who}: ` +
    `the user they set is not known yet, so the budget keys by the client address. ` +
    `Authenticate ${where(resolvers[0]!)}, or mark each function that reads no user with ` +
    `keys.withoutUser`
  );
}

function hasOwnGuards(handler: Handler): boolean {
  if (!DECIDED_FIRST.has(handler.kind)) return false;
  const own = [handler.type, handler.method].flatMap(
    (target) => (Reflect.getMetadata(NEST_METADATA.guards, target) as unknown[] | undefined) ?? [],
  );
  return own.some((guard) => !isRateLimitGuard(guard));
}

/**
 * `policy "a" reads` or `policies "a", "b" read`, of the rules any of whose functions may read
 * the user (the rule that defers them on HTTP routes); undefined when none.
 */
function userPolicyNames(rules: readonly Rule[]): string | undefined {
  const names = [...new Set(rules.filter(readsUser).map((r) => `"${r.name}"`))];
  if (names.length === 0) return undefined;
  return names.length === 1 ? `policy ${names[0]!} reads` : `policies ${names.join(', ')} read`;
}

function where(handler: Handler): string {
  return handler.kind === 'ws'
    ? 'in handleConnection, on the socket'
    : 'in middleware or in the GraphQL context function (set req.user before resolvers run)';
}
