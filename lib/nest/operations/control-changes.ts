import { Logger } from '@nestjs/common';
import {
  checkActor,
  checkOverridePolicy,
  checkOverrideScope,
  checkReason,
  checkTtlMs,
  EXEMPT_FIELD,
  overrideField,
  overrideValue,
  readControl,
  type ControlEntries,
} from '../../core/operator/control.js';
import { quote, RateLimitConfigError } from '../../core/errors.js';
import { controlKey } from '../../core/model/store-keys.js';
import type { RateLimiter } from '../../core/limiter.js';
import { formatRate, type RateInput } from '../../core/model/rate.js';
import type { ControlChange, ControlSnapshot } from '../../core/stores/store.js';
import { canonicalIdentity } from '../../http/identities.js';
import { hashIdentity as hashed } from '../observability/events.js';

/** Options of {@link RateLimitService.setOverride}. */
export interface OverrideOptions {
  /** The policy name it applies to; `'*'` (the default) for every policy of the scope. */
  policy?: string;
  /** How long it lasts, in **ms**: an integer from 1 to 2^31-1 (about 24.8 days). */
  ttlMs: number;
  /** Why, for the audit log and the listing: 1 to 200 characters. */
  reason: string;
  /** Capacity of token-bucket and GCRA policies while it lasts (ignored by the windows). Default: the limit. */
  burst?: number;
  /** Who made the change (an operator's name or id), for the audit line: 1 to 200 characters. */
  actor?: string;
}

/** Options of {@link RateLimitService.exempt}. */
export interface ExemptionOptions {
  /** How long it lasts, in **ms**: an integer from 1 to 2^31-1. */
  ttlMs: number;
  /** Why, for the audit log and the listing: 1 to 200 characters. */
  reason: string;
  /** Who made the change (an operator's name or id), for the audit line: 1 to 200 characters. */
  actor?: string;
}

/** Options of {@link RateLimitService.removeOverride} and {@link RateLimitService.removeExemption}. */
export interface RemovalOptions {
  /** Who made the change (an operator's name or id), for the audit line: 1 to 200 characters. */
  actor?: string;
}

/**
 * The operator's changes behind `RateLimitService`: overrides and exemptions, validated,
 * written to the identity's control hash, and audited (one log line each).
 */
export class ControlChanges {
  private readonly logger = new Logger('RateLimit');

  /** @param ipv6Subnet the module's, to spell `ip:` identities as the guard does */
  constructor(
    private readonly limiter: RateLimiter,
    private readonly ipv6Subnet?: number,
  ) {}

  /** See `RateLimitService.setOverride`. */
  async setOverride(
    identity: string,
    scope: string,
    rate: RateInput,
    options: OverrideOptions,
  ): Promise<void> {
    const where = `RateLimitService.setOverride`;
    identity = this.identity(identity, where);
    checkOverrideScope(scope, where);
    const { policy = '*', ttlMs, reason, burst, actor } = options ?? ({} as OverrideOptions);
    checkOverridePolicy(policy, where);
    checkActor(actor, where);
    const value = overrideValue(rate, burst, where);
    checkTtlMs(ttlMs, where);
    checkReason(reason, where);
    const [limit, periodMs] = value.split(':');
    await this.change(identity, where, {
      op: 'set',
      field: overrideField(scope, policy),
      value,
      ttlMs,
      reason,
    });
    this.audit('rate_limit.override_set', identity, actor, {
      scope,
      policy,
      rate: formatRate({ limit: Number(limit), periodMs: Number(periodMs) }),
      ...(burst !== undefined && { burst }),
      ttlMs,
      reason,
    });
  }

  /** See `RateLimitService.removeOverride`. */
  async removeOverride(
    identity: string,
    scope: string,
    options: { policy?: string } & RemovalOptions = {},
  ): Promise<boolean> {
    const where = `RateLimitService.removeOverride`;
    identity = this.identity(identity, where);
    checkOverrideScope(scope, where);
    const { policy = '*', actor } = options ?? {};
    checkOverridePolicy(policy, where);
    checkActor(actor, where);
    const { removed = false } = await this.change(identity, where, {
      op: 'remove',
      field: overrideField(scope, policy),
    });
    this.audit('rate_limit.override_removed', identity, actor, { scope, policy, removed });
    return removed;
  }

  /** See `RateLimitService.listOverrides`. */
  async listOverrides(identity: string): Promise<ControlEntries> {
    const where = `RateLimitService.listOverrides`;
    identity = this.identity(identity, where);
    const { nowMs, fields } = await this.change(identity, where, { op: 'get' });
    return readControl(fields, nowMs);
  }

  /** See `RateLimitService.exempt`. */
  async exempt(identity: string, options: ExemptionOptions): Promise<void> {
    const where = `RateLimitService.exempt`;
    identity = this.identity(identity, where);
    const { ttlMs, reason, actor } = options ?? ({} as ExemptionOptions);
    checkTtlMs(ttlMs, where);
    checkReason(reason, where);
    checkActor(actor, where);
    await this.change(identity, where, { op: 'set', field: EXEMPT_FIELD, ttlMs, reason });
    this.audit('rate_limit.exemption_set', identity, actor, { ttlMs, reason });
  }

  /** See `RateLimitService.removeExemption`. */
  async removeExemption(identity: string, options: RemovalOptions = {}): Promise<boolean> {
    const where = `RateLimitService.removeExemption`;
    identity = this.identity(identity, where);
    const { actor } = options ?? {};
    checkActor(actor, where);
    const { removed = false } = await this.change(identity, where, {
      op: 'remove',
      field: EXEMPT_FIELD,
    });
    this.audit('rate_limit.exemption_removed', identity, actor, { removed });
    return removed;
  }

  private change(identity: string, where: string, change: ControlChange): Promise<ControlSnapshot> {
    const store = this.limiter.store;
    if (typeof store.control !== 'function') {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_STORE_UNSUPPORTED',
        'this rate-limit store keeps no overrides or exemptions: implement RateLimitStore.control',
        where,
      );
    }
    const key = controlKey(this.limiter.prefix, identity);
    // A denial remembered here may no longer hold under the new override or exemption
    // (forgotten again once written: a request may have remembered one meanwhile).
    this.limiter.forgetDenials(identity);
    return this.limiter
      .operate(() => store.control!(key, change))
      .finally(() => this.limiter.forgetDenials(identity));
  }

  /**
   * A valid identity, `ip:` ones in the guard's own spelling, so `reset('ip:2001:0db8::1')`
   * finds the keys of `ip:2001:db8::/64` (per the module's `ipv6Subnet`).
   * @throws {RateLimitConfigError} for anything but a non-empty string
   */
  identity(identity: unknown, where: string): string {
    checkIdentity(identity, where);
    return canonicalIdentity(identity, this.ipv6Subnet);
  }

  /**
   * One audit line per change, identity hashed (it may be an API key or personal data); the
   * actor in clear, since an audit line is there to say who.
   */
  private audit(
    event: string,
    identity: string,
    actor: string | undefined,
    detail: Record<string, unknown>,
  ): void {
    const line = { identity: hashed(identity), ...(actor !== undefined && { actor }), ...detail };
    this.logger.log(`${event} ${JSON.stringify(line)}`);
  }
}

function checkIdentity(identity: unknown, where: string): asserts identity is string {
  if (typeof identity !== 'string' || identity === '') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_CONTROL',
      `invalid identity ${quote(identity)}: expected a non-empty string`,
      where,
    );
  }
}
