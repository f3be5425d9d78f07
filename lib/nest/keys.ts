import type { ExecutionContext } from '@nestjs/common';
import { headerIdentity, userIdentity } from '../http/identities.js';
import type { RequestLike } from '../http/ip.js';

/** What the guard hands every key function besides the context. */
export interface KeyHelpers {
  /** The client identity by address, `ip:<address>`, per the module's `trustedProxies` and `ipv6Subnet`. */
  ip(): string;
}

/**
 * Who a request counts against. Returns an identity such as `user:42`; undefined (or '')
 * falls back to the client IP, so an anonymous request is still limited.
 */
export type KeyFn = (
  ctx: ExecutionContext,
  helpers: KeyHelpers,
) => string | undefined | Promise<string | undefined>;

const request = (ctx: ExecutionContext) => ctx.switchToHttp().getRequest<RequestLike>();

/** Built-in identities (DESIGN §5). */
export const keys = {
  /** The client address, `ip:<address>`. */
  ip: ((_ctx, helpers) => helpers.ip()) satisfies KeyFn,

  /** `user:<id>` from `request.user` (`id`, else `sub`, else `userId`; or your selector). */
  user:
    (select?: (user: unknown) => unknown): KeyFn =>
    (ctx) =>
      userIdentity(request(ctx), select),

  /** `user:<id>` when authenticated, else `ip:<address>`: the default. */
  userOrIp: ((ctx, helpers) => userIdentity(request(ctx)) ?? helpers.ip()) satisfies KeyFn,

  /** A header's value, hashed (`hdr:<name>:<hash>`): API keys are never stored in clear. */
  header:
    (name: string): KeyFn =>
    (ctx) =>
      headerIdentity(request(ctx), name),

  /**
   * Several identities in one, e.g. `keys.compose(keys.header('x-api-key'), keys.ip)`: one
   * budget per API key and address. A part that is absent counts as `-`; when every part
   * is absent the whole is too (so the client IP applies, not one bucket for all).
   */
  compose:
    (...parts: KeyFn[]): KeyFn =>
    async (ctx, helpers) => {
      const values = await Promise.all(parts.map((part) => part(ctx, helpers)));
      if (values.every((v) => v === undefined || v === '')) return undefined;
      return values.map((v) => v || '-').join('+');
    },
};
