import { quote, RateLimitConfigError } from '../errors.js';
import { checkScope, resolvePolicy } from '../model/policy.js';
import { parseRate, type RateInput } from '../model/rate.js';

/**
 * Overrides and exemptions as stored in an identity's control hash (see `controlKey`):
 * the field names and values, their validation, and their reading. The per-request script
 * reads the same format; operators write it through `RateLimitService`.
 */

/** Field of the exemption: `"<untilMs>"`. */
export const EXEMPT_FIELD = 'exempt';

/** Longest `ttlMs` of an override or exemption: 2^31-1 ms (about 24.8 days). */
const MAX_CONTROL_TTL_MS = 2 ** 31 - 1;

/** Longest reason, in characters. */
const MAX_REASON_LENGTH = 200;

const NAME_OR_ANY = /^(\*|[A-Za-z0-9_.-]{1,64})$/;

/** `o:<scope>:<policy>`, where either may be `*`. */
export function overrideField(scope: string, policy: string): string {
  return `o:${scope}:${policy}`;
}

/** One active override, as listed. Durations in **ms**. */
export interface OverrideEntry {
  /** The scope it applies to, or `*` for every scope. */
  readonly scope: string;
  /** The policy name it applies to, or `*` for every policy of the scope. */
  readonly policy: string;
  /** Units per period while the override lasts. */
  readonly limit: number;
  /** Period in **ms**. */
  readonly periodMs: number;
  /** Capacity of token-bucket and GCRA policies; absent: the limit. */
  readonly burst?: number;
  /** **ms** until the override ends by itself (on the store's clock). */
  readonly expiresInMs: number;
  readonly reason: string;
}

/** An active exemption. */
export interface ExemptionEntry {
  /** **ms** until the exemption ends by itself. */
  readonly expiresInMs: number;
  readonly reason: string;
}

/** Everything active in one control hash. */
export interface ControlEntries {
  readonly exemption?: ExemptionEntry;
  readonly overrides: readonly OverrideEntry[];
}

/**
 * The active entries of a control hash at `nowMs` (expired ones and malformed ones left
 * out), overrides sorted by scope then policy.
 */
export function readControl(
  fields: Readonly<Record<string, string>>,
  nowMs: number,
): ControlEntries {
  let exemption: ExemptionEntry | undefined;
  const overrides: OverrideEntry[] = [];
  for (const [field, value] of Object.entries(fields)) {
    const reason = fields[`r:${field}`] ?? '';
    if (field === EXEMPT_FIELD) {
      const until = /^\d{1,16}$/.test(value) ? Number(value) : NaN;
      if (Number.isSafeInteger(until) && until > nowMs)
        exemption = { expiresInMs: until - nowMs, reason };
      continue;
    }
    if (!field.startsWith('o:')) continue;
    const parts = field.split(':');
    const override = parseOverrideValue(value, nowMs);
    if (parts.length !== 3 || !override) continue;
    overrides.push({ scope: parts[1]!, policy: parts[2]!, ...override, reason });
  }
  overrides.sort((a, b) =>
    a.scope === b.scope ? a.policy.localeCompare(b.policy) : a.scope.localeCompare(b.scope),
  );
  return { ...(exemption && { exemption }), overrides };
}

/**
 * The override that applies to policy `name` in `scope`, by precedence: `o:<scope>:<name>`,
 * then `o:<scope>:*`, then `o:*:<name>`, then `o:*:*`; expired ones are skipped.
 */
export function applicableOverride(
  fields: Readonly<Record<string, string>>,
  nowMs: number,
  scope: string,
  name: string,
): Omit<OverrideEntry, 'scope' | 'policy' | 'reason'> | undefined {
  for (const field of [
    overrideField(scope, name),
    overrideField(scope, '*'),
    overrideField('*', name),
    overrideField('*', '*'),
  ]) {
    const value = fields[field];
    const override = value === undefined ? undefined : parseOverrideValue(value, nowMs);
    if (override) return override;
  }
  return undefined;
}

/** The largest limit × period (and burst × period) any rate may have: 2^50. */
const MAX_SCALED = 2 ** 50;
const OVERRIDE_VALUE = /^(\d{1,16}):(\d{1,16}):(\d{1,16}):(\d{1,16})$/;

/** Reads `<untilMs>:<limit>:<periodMs>:<burst>` exactly as the consume script does. */
function parseOverrideValue(value: string, nowMs: number) {
  const match = value.length <= 64 ? OVERRIDE_VALUE.exec(value) : null;
  const [until, limit, periodMs, burst] = (match?.slice(1) ?? []).map(Number);
  if (
    !match ||
    ![until, limit, periodMs, burst].every((n) => Number.isSafeInteger(n)) ||
    !(until! > nowMs) ||
    !(limit! >= 1 && periodMs! >= 1) ||
    limit! * periodMs! > MAX_SCALED ||
    (burst || limit!) * periodMs! > MAX_SCALED
  ) {
    return undefined;
  }
  return {
    limit: limit!,
    periodMs: periodMs!,
    ...(burst! > 0 && { burst: burst! }),
    expiresInMs: until! - nowMs,
  };
}

/**
 * Checks a `ttlMs`: an integer number of ms from 1 to 2^31-1.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_CONTROL`
 */
export function checkTtlMs(ttlMs: unknown, where?: string): asserts ttlMs is number {
  if (
    !Number.isSafeInteger(ttlMs) ||
    (ttlMs as number) < 1 ||
    (ttlMs as number) > MAX_CONTROL_TTL_MS
  ) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_CONTROL',
      `invalid ttlMs ${quote(ttlMs)}: expected an integer number of ms from 1 to 2^31-1`,
      where,
    );
  }
}

/**
 * Checks a reason: a string of 1 to 200 characters, not only blanks.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_CONTROL`
 */
export function checkReason(reason: unknown, where?: string): asserts reason is string {
  if (typeof reason !== 'string' || reason.trim() === '' || reason.length > MAX_REASON_LENGTH) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_CONTROL',
      `invalid reason ${quote(typeof reason === 'string' && reason.length > 40 ? `${reason.slice(0, 40)}…` : reason)}: expected a non-empty string of at most ${MAX_REASON_LENGTH} characters`,
      where,
    );
  }
}

/** Longest `actor` of a control change, in characters. */
const MAX_ACTOR_LENGTH = 200;

/**
 * Checks who made a control change (for the audit line): absent, or 1 to 200 printable
 * characters.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_CONTROL`
 */
export function checkActor(actor: unknown, where?: string): asserts actor is string | undefined {
  if (actor === undefined) return;
  // eslint-disable-next-line no-control-regex
  if (typeof actor !== 'string' || !/^[^\u0000-\u001f\u007f]{1,200}$/.test(actor)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_CONTROL',
      `invalid actor ${quote(actor)}: expected 1 to ${MAX_ACTOR_LENGTH} printable characters`,
      where,
    );
  }
}

/**
 * Checks the scope of an override: a scope name, or `*` for every scope.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_SCOPE`
 */
export function checkOverrideScope(scope: unknown, where?: string): asserts scope is string {
  if (scope !== '*') checkScope(scope, where);
}

/**
 * Checks the policy name of an override: a policy name, or `*` for every policy.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_NAME`
 */
export function checkOverridePolicy(policy: unknown, where?: string): asserts policy is string {
  if (typeof policy !== 'string' || !NAME_OR_ANY.test(policy)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_NAME',
      `invalid policy name ${quote(policy)}: use 1-64 of A-Z a-z 0-9 _ . -, or *`,
      where,
    );
  }
}

/**
 * The value of an override field after `<untilMs>:`, i.e. `"<limit>:<periodMs>:<burst>"`.
 * @throws {RateLimitConfigError} `ERR_RATE_LIMIT_RATE` or `ERR_RATE_LIMIT_BURST`
 */
export function overrideValue(rate: RateInput, burst: number | undefined, where?: string): string {
  const { limit, periodMs } = parseRate(rate, where);
  // Checks the burst as a token bucket's (an integer >= 1, burst × periodMs <= 2^50).
  if (burst !== undefined) resolvePolicy({ rate: { limit, periodMs }, burst }, where);
  return `${limit}:${periodMs}:${burst ?? 0}`;
}
