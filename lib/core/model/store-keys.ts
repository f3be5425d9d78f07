import { createHash } from 'node:crypto';
import { quote, RateLimitConfigError } from '../errors.js';

// Printable ASCII without `{` and `}` (they would break the Cluster hash tag), at most 64.
const PLAIN_IDENTITY = /^[!-z|~]{1,64}$/;
const PREFIX_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * The part of the Redis key that names the identity, used as the Cluster hash tag so all
 * keys of one identity share a slot (stacked policies never raise CROSSSLOT).
 *
 * Identities longer than 64 characters, or with characters outside printable ASCII, or
 * with `{` / `}`, are replaced by `h:` + the first 22 characters of base64url(SHA-256)
 * (hashed as UTF-16LE code units). So are identities that already start with `h:`, so that no
 * chosen identity can land in another one's bucket.
 */
export function identityTag(identity: string): string {
  if (PLAIN_IDENTITY.test(identity) && !identity.startsWith('h:')) return identity;
  // UTF-16 code units, not UTF-8: UTF-8 would turn every lone surrogate into U+FFFD and
  // give distinct identities one bucket.
  return `h:${createHash('sha256').update(identity, 'utf16le').digest('base64url').slice(0, 22)}`;
}

/** `<prefix>:{<identityTag>}:`: every key of one identity starts with this. */
export function identityKeyPrefix(prefix: string, identity: string): string {
  return `${prefix}:{${identityTag(identity)}}:`;
}

/** The scope of policies that name none, written empty in keys (see {@link policyKey}). */
const DEFAULT_SCOPE = 'global';
/** The name of a policy that gives none, written empty in keys (see {@link policyKey}). */
const DEFAULT_NAME = 'default';

/**
 * The state key of one policy: `<prefix>:{<identityTag>}:<scope>:<policy>:<algorithmTag>`,
 * with the scope `global` and the policy name `default` written empty (see
 * docs/guides/redis-in-production.md for the layout).
 *
 * Empty because Redis keeps a key of up to 30 characters in a smaller allocation: with both
 * defaults, `rl:{ip:255.255.255.255}:::gcra` is 30 characters, and one identity's key costs
 * 72 bytes (`MEMORY USAGE`) rather than 88. Neither a scope nor a name can be empty, so the
 * key still reads back (see {@link scopeAndNameOf}) and a scope's keys still share a prefix.
 */
export function policyKey(
  prefix: string,
  identity: string,
  scope: string,
  policy: string,
  algorithmTag: string,
): string {
  return `${identityKeyPrefix(prefix, identity)}${scope === DEFAULT_SCOPE ? '' : scope}:${policy === DEFAULT_NAME ? '' : policy}:${algorithmTag}`;
}

/** What every key of one identity's `scope` starts with: `<prefix>:{<identityTag>}:<scope>:`. */
export function scopeKeyPrefix(prefix: string, identity: string, scope: string): string {
  return `${identityKeyPrefix(prefix, identity)}${scope === DEFAULT_SCOPE ? '' : scope}:`;
}

/**
 * The scope and policy name of a key made by {@link policyKey}, from its part after the
 * identity's key prefix (`<scope>:<policy>:<algorithmTag>`, with any suffix after):
 * `['global', 'default']` for the defaults written empty.
 */
export function scopeAndNameOf(rest: string): [scope: string, name: string] {
  const [scope = '', name = ''] = rest.split(':', 2);
  return [scope || DEFAULT_SCOPE, name || DEFAULT_NAME];
}

/** Suffix of the control key after the identity's key prefix (see {@link controlKey}). */
export const CONTROL_SUFFIX = 'ctl';

/**
 * The control key of one identity: `<prefix>:{<identityTag>}:ctl`, a Redis hash holding its
 * overrides and exemption (in the identity's slot, next to its policy keys). Fields:
 * - `exempt`: `"<untilMs>"`;
 * - `o:<scope>:<name>`: `"<untilMs>:<limit>:<periodMs>:<burst>"` (burst 0 = none), where
 *   `<scope>` and `<name>` may be `*`;
 * - `r:<field>`: the reason given for that field.
 *
 * `untilMs` is epoch ms on the Redis server clock. A reset never deletes this key.
 */
export function controlKey(prefix: string, identity: string): string {
  return `${identityKeyPrefix(prefix, identity)}${CONTROL_SUFFIX}`;
}

/** The control key of the identity a policy key belongs to: `<prefix>:{<identity>}:ctl`. */
export function controlKeyOf(policyKey: string): string {
  return `${policyKey.slice(0, policyKey.indexOf('}') + 1)}:${CONTROL_SUFFIX}`;
}

/** True for a key made by {@link controlKey} (any prefix, any identity). */
export function isControlKey(key: string): boolean {
  return key.endsWith(`}:${CONTROL_SUFFIX}`);
}

/**
 * Checks a key prefix: 1-64 of `A-Z a-z 0-9 _ . : -`.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_OPTION`
 */
export function checkPrefix(prefix: unknown, where?: string): asserts prefix is string {
  if (typeof prefix !== 'string' || !PREFIX_PATTERN.test(prefix)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_OPTION',
      `invalid prefix ${quote(prefix)}: use 1-64 of A-Z a-z 0-9 _ . : -`,
      where,
    );
  }
}

const OVERRIDE_SUFFIX = /:o\d+$/;

/** A policy key without the `:o<untilMs>` of the state an override runs on. */
export function baseKeyOf(key: string): string {
  return key.replace(OVERRIDE_SUFFIX, '');
}

/**
 * The algorithm tag of a policy key (`fw`, `sw`, `tb`, `gcra`), also for the
 * `<key>:o<untilMs>` an override runs on.
 */
export function algorithmTagOf(key: string): string {
  const base = baseKeyOf(key);
  return base.slice(base.lastIndexOf(':') + 1);
}
