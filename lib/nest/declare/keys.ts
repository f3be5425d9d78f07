import type { ExecutionContext } from '@nestjs/common';
import { headerIdentity, userIdentity } from '../../http/identities.js';
import { requestOf, userOf } from './context.js';

/** What the guard hands every key function besides the context. */
export interface KeyHelpers {
  /** The client identity by address, `ip:<address>`, per the module's `trustedProxies` and `ipv6Subnet`. */
  ip(): string;
}

/**
 * Who a request counts against. Returns an identity such as `user:42`; undefined (or '')
 * falls back to the client IP, so an anonymous request is still limited. Read the request
 * and the user with `rateLimitContext(ctx)`, whatever the transport.
 */
export type KeyFn = (
  ctx: ExecutionContext,
  helpers: KeyHelpers,
) => string | undefined | Promise<string | undefined>;

/** A user function of a policy: its key, rate or cost function, or `byTier`'s plan function. */
export type UserFn = (ctx: ExecutionContext, helpers: KeyHelpers) => unknown;

/** User functions known to read no user: decided before the route's own guards. */
const userless = new WeakSet<object>();

function withoutUser<F extends UserFn>(fn: F): F {
  userless.add(fn);
  return fn;
}

/**
 * Whether `fn` (a key, rate or cost function) may read the authenticated user: nothing shows
 * that a function does not, so true for your own functions, `keys.userOrIp` (the default) and
 * `keys.user`; false for `keys.ip`, `keys.header`, a `keys.compose` of those, a `byTier` whose
 * plan function is marked, and any function marked with `keys.withoutUser`. On an HTTP route
 * that a guard of its own or a global guard registered after the module's authenticates, a
 * policy any of whose functions may read the user is decided after those guards.
 */
export function needsUser(fn: object): boolean {
  return !userless.has(fn);
}

/**
 * Built-in identities, on every transport that has what they read (see
 * docs/guides/identities-and-proxies.md).
 */
export const keys = {
  /**
   * Marks your key, rate or cost function (or `byTier`'s plan function) as one that reads no
   * user (a header, the body, a route parameter): on a route with guards of its own its
   * policy is decided before them, like one keyed by `keys.ip`, e.g. a per-account login
   * limit, `keys.withoutUser((ctx) => 'acct:' + rateLimitContext(ctx).request?.body?.account)`,
   * or `cost: keys.withoutUser((ctx) => rateLimitContext(ctx).request.body.items.length)`.
   * Returns `fn`.
   */
  withoutUser: <F extends UserFn>(fn: F): F => withoutUser(fn),

  /** The client address, `ip:<address>`. */
  ip: withoutUser<KeyFn>((_ctx, helpers) => helpers.ip()),

  /**
   * `user:<id>` from the authenticated user (`id`, else `sub`, else `userId`; or your
   * selector): `request.user` on HTTP, or the user Nest middleware set on Fastify's raw request.
   */
  user:
    (select?: (user: unknown) => unknown): KeyFn =>
    (ctx) =>
      userIdentity(userOf(ctx), select),

  /** `user:<id>` when authenticated, else `ip:<address>`: the default. */
  userOrIp: ((ctx, helpers) => userIdentity(userOf(ctx)) ?? helpers.ip()) satisfies KeyFn,

  /** A header's value, hashed (`hdr:<name>:<hash>`): API keys are never stored in clear. */
  header: (name: string): KeyFn =>
    withoutUser<KeyFn>((ctx) => {
      const request = requestOf(ctx);
      return request && headerIdentity(request, name);
    }),

  /**
   * Several identities in one, e.g. `keys.compose(keys.header('x-api-key'), keys.ip)`: one
   * budget per API key and address. A part that is absent counts as `-`; when every part
   * is absent the whole is too (so the client IP applies, not one bucket for all).
   */
  compose: (...parts: KeyFn[]): KeyFn => {
    const composed: KeyFn = async (ctx, helpers) => {
      const values = await Promise.all(parts.map((part) => part(ctx, helpers)));
      if (values.every((v) => v === undefined || v === '')) return undefined;
      return values.map((v) => v || '-').join('+');
    };
    return parts.some(needsUser) ? composed : withoutUser(composed);
  },
};
