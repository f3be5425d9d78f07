import { quote, RateLimitConfigError } from '../../core/errors.js';
import type { RateInput } from '../../core/model/rate.js';
import type { CostOptions } from '../../graphql/cost.js';
import { declare } from '../declare/declare-policy.js';
import type { DeclaredPolicy, RateLimitOptions } from '../declare/decorators.js';

/**
 * A points budget of GraphQL operations: `@RateLimit`'s options without `cost` (each
 * operation costs its requested cost, computed from its document) or `count` (the refund is
 * down to the actual cost), and the rate in points.
 */
export type GraphQLCostBudget = Omit<
  RateLimitOptions,
  'cost' | 'count' | 'failed' | 'addressBurst'
> & {
  /** Points per period, e.g. `'1000/h'`. */
  rate: RateInput;
};

/**
 * GraphQL operation cost, the module's `graphql` option. The cost of each operation is
 * computed from its document before any resolver runs, with the weights of the IBM GraphQL
 * Cost Directive specification (`@cost`, `@listSize`, or `Cost`/`ListSize` from
 * `nest-rate-limit/graphql` in code-first); see `lib/graphql/cost.ts` for the defaults, and
 * docs/guides/graphql.md.
 */
export interface GraphQLCostOptions extends CostOptions {
  /**
   * The most an operation may cost, in points: one over it is refused before any resolver
   * runs, with `extensions.code: 'MAX_COST_EXCEEDED'` and its cost (HTTP 400), and spends
   * nothing. Unset: no maximum.
   */
  maxCost?: number;
  /**
   * The points budget: a rate (`'1000/h'`: 1000 points an hour per identity) or a policy with
   * options (`key`, `algorithm`, `burst`, `onStoreFailure`, ...), or several, stacked. Each
   * operation is charged its requested cost once, before execution, all-or-nothing, and
   * refunded down to its actual cost after it. Its scope is `'graphql'` and its name `'cost'`
   * unless given. Unset: no budget (only `maxCost`, and `extensions.cost`).
   */
  budget?: RateInput | GraphQLCostBudget | readonly GraphQLCostBudget[];
  /**
   * `extensions.cost` on every response (`requestedQueryCost`, `actualQueryCost`, and
   * `throttleStatus`: `maximumAvailable`, `currentlyAvailable`, `restoreRate` in points per
   * second), as Shopify sends it. Default true.
   */
  costInResponse?: boolean;
  /**
   * Operation limits, checked once the document is validated and before the cost walk and any
   * resolver, as Apollo Router's and GitHub's: an operation over one is refused with HTTP 400,
   * `extensions.code: 'OPERATION_LIMIT_EXCEEDED'`, `limit` (the option's name), `measured` and
   * `maximum`, spends no budget and runs nothing. Each is a positive integer, or `Infinity` to
   * turn it off; unset, the default of `DEFAULT_OPERATION_LIMITS` (`nest-rate-limit/graphql`).
   *
   * The deepest field nesting of the operation, fragments expanded (`{ a { b } }` is 2).
   */
  maxDepth?: number;
  /** The distinct fields (by type and name) the operation selects, fragments expanded. */
  maxHeight?: number;
  /** The aliased fields of the operation, fragments expanded. */
  maxAliases?: number;
  /** The fields selected at the operation's root (aliases of one field count each). */
  maxRootFields?: number;
  /**
   * The most lexical tokens (names, punctuators, values) a document may have, handed to
   * graphql-js's `parse(..., { maxTokens })`: a document over it is refused by the parser
   * (Apollo: 400 `GRAPHQL_PARSE_FAILED`; Mercurius: 400 with graphql-js's syntax error;
   * graphql-ws under Apollo: an `error` message) before any other work. Default
   * {@link DEFAULT_MAX_TOKENS}, Apollo Router's `parser_max_tokens`; `Infinity` turns it off.
   * Set on Apollo Server's `parseOptions` and Mercurius's `graphql.parseOptions` unless the
   * app's `GraphQLModule` options already set `maxTokens` there (theirs wins). Mercurius parses
   * subscription documents over its WebSocket without it.
   */
  maxTokens?: number;
}

/** Default `maxTokens`: Apollo Router's `limits.parser_max_tokens`, in tokens. */
export const DEFAULT_MAX_TOKENS = 15_000;

/** The operation limit options, by name. */
export const LIMIT_OPTIONS = ['maxDepth', 'maxHeight', 'maxAliases', 'maxRootFields'] as const;

const WHERE = 'RateLimitModule options graphql';

/** The scope of operation budgets in keys: one budget per identity for every operation. */
const OPERATION_SCOPE = 'graphql';

/**
 * The budget policies of `options`, declared and checked (at bootstrap).
 * @throws {RateLimitConfigError} naming the offending value
 */
export function declareBudgets(options: GraphQLCostOptions): DeclaredPolicy[] {
  const { budget } = options;
  if (budget === undefined) return [];
  const list: readonly (RateInput | GraphQLCostBudget)[] = Array.isArray(budget)
    ? (budget as readonly GraphQLCostBudget[])
    : [budget as RateInput | GraphQLCostBudget];
  return list.map((item, i) => {
    const where = `${WHERE} budget${Array.isArray(budget) ? `[${i}]` : ''}`;
    if (
      typeof item === 'string' ||
      (typeof item === 'object' && item !== null && !('rate' in item))
    )
      return declare(item as RateInput, { name: 'cost', scope: OPERATION_SCOPE }, where);
    if (typeof item !== 'object' || item === null) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_GRAPHQL_OPTION',
        `invalid budget ${quote(item)}: expected a rate such as '1000/h' or { rate, ... }`,
        where,
      );
    }
    const { rate, ...rest } = item;
    for (const banned of ['cost', 'count'] as const) {
      if ((rest as RateLimitOptions)[banned] !== undefined) {
        throw new RateLimitConfigError(
          'ERR_RATE_LIMIT_GRAPHQL_OPTION',
          `a budget takes no ${banned}: each operation costs its requested cost, refunded down to its actual cost`,
          where,
        );
      }
    }
    return declare(rate, { name: 'cost', scope: OPERATION_SCOPE, ...rest }, where);
  });
}

/**
 * Checks the options no declared policy checks.
 * @throws {RateLimitConfigError} naming the offending value
 */
export function validateCostOptions(options: GraphQLCostOptions): void {
  if (options === null || typeof options !== 'object') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_GRAPHQL_OPTION',
      `invalid ${quote(options)}`,
      WHERE,
    );
  }
  const positive = (name: 'maxCost' | 'defaultListSize' | 'minimumCost') => {
    const value = options[name];
    if (value === undefined) return;
    if (!Number.isSafeInteger(value) || value < (name === 'maxCost' ? 1 : 0)) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_GRAPHQL_OPTION',
        `invalid ${name} ${quote(value)}: expected an integer >= ${name === 'maxCost' ? 1 : 0}`,
        WHERE,
      );
    }
  };
  for (const name of [...LIMIT_OPTIONS, 'maxTokens', 'maxAnalysisSteps'] as const) {
    const value: unknown = (options as Record<string, unknown>)[name];
    if (value === undefined || value === Infinity) continue;
    if (!Number.isSafeInteger(value) || (value as number) < 1) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_GRAPHQL_OPTION',
        `invalid ${name} ${quote(value)}: expected an integer >= 1, or Infinity for no limit`,
        WHERE,
      );
    }
  }
  positive('maxCost');
  positive('defaultListSize');
  positive('minimumCost');
  const { operationTypeCost, countIntrospection } = options;
  if (operationTypeCost !== undefined) {
    const valid =
      typeof operationTypeCost === 'object' &&
      operationTypeCost !== null &&
      Object.entries(operationTypeCost).every(
        ([type, cost]) =>
          ['query', 'mutation', 'subscription'].includes(type) &&
          (cost === undefined || (Number.isSafeInteger(cost) && (cost as number) >= 0)),
      );
    if (!valid) {
      throw new RateLimitConfigError(
        'ERR_RATE_LIMIT_GRAPHQL_OPTION',
        `invalid operationTypeCost ${quote(operationTypeCost)}: expected { query?, mutation?, subscription? }, integers >= 0`,
        WHERE,
      );
    }
  }
  if (countIntrospection !== undefined && typeof countIntrospection !== 'boolean') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_GRAPHQL_OPTION',
      `invalid countIntrospection ${quote(countIntrospection)}: expected true or false`,
      WHERE,
    );
  }
  if (options.costInResponse !== undefined && typeof options.costInResponse !== 'boolean') {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_GRAPHQL_OPTION',
      `invalid costInResponse ${quote(options.costInResponse)}: expected true or false`,
      WHERE,
    );
  }
  declareBudgets(options);
}
