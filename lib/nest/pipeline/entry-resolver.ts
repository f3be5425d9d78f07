import type { ExecutionContext } from '@nestjs/common';
import { definePolicy, type LimitEntry } from '../../core/limiter.js';
import { quote, RateLimitConfigError } from '../../core/errors.js';
import type { Policy } from '../../core/model/policy.js';
import { formatRate, type RateInput } from '../../core/model/rate.js';
import { stricterRate, strictestTier } from '../declare/tiers.js';
import { messageOf, type RateLimitEvents } from '../observability/events.js';
import type { IdentityOf } from './stages/identify.js';
import type { RateLimitModuleOptions } from '../module/options.js';
import { addressPolicy, type Route, type Rule } from '../plan/rules.js';

/** A rule and what it asks of the store for one request. */
export type Entry = { rule: Rule; entry: LimitEntry };

/** The entries of a request, and the rules that could not be given any (see `entriesOf`). */
export interface Entries {
  entries: Entry[];
  broken: Rule[];
}

const NO_RULES: Rule[] = [];

/** Rates chosen per request are few (code, plans): beyond this, a buggy rate function is assumed. */
const MAX_DYNAMIC_POLICIES = 1000;

/**
 * Turns a route's rules into store entries for one request: the identity of each, its
 * policy (resolving a rate function) and its cost (resolving a cost function).
 */
export class EntryResolver {
  /** Policies of rate functions, by the answer and what else shapes the policy. */
  private readonly dynamicPolicies = new Map<string, Policy>();
  /** Per rule with a rate function, the strictest policy it has answered: see `policyInstead`. */
  private readonly strictestAnswered = new WeakMap<Rule, Policy>();

  constructor(
    private readonly options: RateLimitModuleOptions,
    private readonly events: RateLimitEvents,
  ) {}

  /** The entries of a fixed route whose identities are all known already; else undefined. */
  fixedEntries(route: Route, identityOf: IdentityOf): Entries | undefined {
    if (!route.fixed) return undefined;
    const entries: Entry[] = [];
    for (const rule of route.enforced) {
      const identity = identityOf(rule.key);
      if (typeof identity !== 'string') return undefined;
      entries.push({
        rule,
        entry: { identity, policy: rule.policy!, cost: rule.cost as number, scope: rule.scope },
      });
    }
    return { entries, broken: NO_RULES };
  }

  /**
   * The entries of `rules`. A rate or cost function that throws, rejects or answers an invalid
   * value never takes its rule off the request: a cost is charged at least 1, a rate is the
   * strictest one known (see `policyInstead`). A rule left with no entry (a fail-closed one
   * whose cost function threw, a rate function that never answered) is listed in `broken`.
   * Each is logged as `rate_limit.config_error`.
   */
  async entriesOf(
    ctx: ExecutionContext | undefined,
    route: Route,
    rules: readonly Rule[],
    identityOf: IdentityOf,
  ): Promise<Entries> {
    const broken: Rule[] = [];
    const fail = (rule: Rule) => (error: unknown) => {
      this.events.configError(route.name, error);
      broken.push(rule);
      return undefined;
    };
    const entries = await Promise.all(
      rules.map(async (rule): Promise<Entry | undefined> => {
        const [identity, policy, cost] = await Promise.all([
          identityOf(rule.key),
          this.policyOf(rule, ctx).catch(fail(rule)),
          this.costOf(rule, ctx).catch(fail(rule)),
        ]);
        if (policy === undefined || cost === undefined) return undefined;
        return { rule, entry: { identity, policy, cost, scope: rule.scope } };
      }),
    );
    return { entries: entries.filter((e) => e !== undefined), broken };
  }

  private async policyOf(rule: Rule, ctx: ExecutionContext | undefined): Promise<Policy> {
    if (rule.policy) return rule.policy;
    let policy: Policy;
    try {
      // Only rules with a rate function read `ctx`, and only calls of a handler have those.
      policy = this.policyFor(rule, await rule.rateFn!(ctx!));
    } catch (error) {
      return this.policyInstead(rule, error);
    }
    const strictest = this.strictestAnswered.get(rule);
    if (strictest !== policy && (strictest === undefined || stricter(policy, strictest))) {
      this.strictestAnswered.set(rule, policy);
    }
    return policy;
  }

  /** The policy of `rule` at `rate`, built once per rate. */
  private policyFor(rule: Rule, rate: RateInput): Policy {
    const algorithm = rule.options.algorithm ?? this.options.algorithm;
    const cacheKey = JSON.stringify([
      rule.where,
      rule.name,
      rate,
      algorithm,
      rule.options.burst,
      // Resolved: one module default per route has one scope per route.
      rule.scope,
      rule.addressBurst,
    ]);
    let policy = this.dynamicPolicies.get(cacheKey);
    if (!policy) {
      policy = definePolicy(
        {
          name: rule.name,
          rate,
          algorithm,
          burst: rule.options.burst,
          scope: rule.scope,
          block: rule.options.block,
          extendBlock: rule.options.extendBlock,
        },
        rule.where,
      );
      if (rule.addressBurst !== undefined) {
        policy = addressPolicy(policy, rule.addressBurst, rule.where);
      }
      if (this.dynamicPolicies.size >= MAX_DYNAMIC_POLICIES) this.dynamicPolicies.clear();
      this.dynamicPolicies.set(cacheKey, policy);
    }
    return policy;
  }

  /**
   * The policy of a rule whose rate function threw, rejected or answered no valid rate: never
   * none, or a client whose input makes it throw would go unlimited. A `byTier` function's
   * strictest tier; else the strictest rate the function has answered in this process. Logged
   * as `rate_limit.config_error`.
   * @throws `error` when the function has never answered: the rule is then refused as a
   *   fail-closed policy is without its store (see `stages/entries.ts`)
   */
  private policyInstead(rule: Rule, error: unknown): Policy {
    const tier = strictestTier(rule.rateFn!);
    const instead = tier ? this.policyFor(rule, tier) : this.strictestAnswered.get(rule);
    if (instead === undefined) throw error;
    this.events.configError(
      rule.where,
      new RateLimitConfigError(
        'ERR_RATE_LIMIT_RATE',
        `the rate function of policy "${rule.name}" failed (${messageOf(error)}): limited at ${formatRate(instead)}, its ${tier ? 'strictest tier' : 'strictest rate so far'}`,
        rule.where,
      ),
    );
    return instead;
  }

  private async costOf(rule: Rule, ctx: ExecutionContext | undefined): Promise<number> {
    if (typeof rule.cost !== 'function') return rule.cost;
    let cost: unknown;
    try {
      cost = await rule.cost(ctx!);
    } catch (error) {
      // A fail-closed policy refuses instead (see `stages/entries.ts`).
      if (rule.failClosed) throw error;
      return this.clampedCost(undefined, rule, error);
    }
    if (typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 0) return cost;
    return this.clampedCost(cost, rule);
  }

  /**
   * What a cost function's invalid answer costs: never less than a plain call, so that an
   * argument the client chose (`first: -11` in `Math.ceil(first / 10)`) cannot take the
   * policy off the request. A fraction is rounded up, a number past 2^53 is 2^53 - 1 (over
   * any capacity: refused), and a negative number, NaN or anything else costs 1. Logged as
   * `rate_limit.config_error`: the function has a bug to fix.
   * @param thrown what the function threw, if it did: charged 1, as a plain call
   */
  private clampedCost(cost: unknown, rule: Rule, thrown?: unknown): number {
    const clamped =
      typeof cost === 'number' && cost > 0 ? Math.min(Math.ceil(cost), Number.MAX_SAFE_INTEGER) : 1;
    const what = thrown === undefined ? `returned ${quote(cost)}` : `threw (${messageOf(thrown)})`;
    this.events.configError(
      rule.where,
      new RateLimitConfigError(
        'ERR_RATE_LIMIT_COST',
        `the cost function of policy "${rule.name}" ${what}: charged ${clamped} (a cost is an integer >= 0)`,
        rule.where,
      ),
    );
    return clamped;
  }
}

/** Whether `a` admits fewer requests over time than `b`. */
function stricter(a: Policy, b: Policy): boolean {
  return a !== b && stricterRate(b, a) === a;
}
