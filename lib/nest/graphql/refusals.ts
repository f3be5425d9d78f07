import type { RequestOutcome } from '../pipeline/outcome.js';

/** The codes an operation is refused with, before execution. */
export type OperationRefusalCode =
  | 'MAX_COST_EXCEEDED'
  | 'OPERATION_LIMIT_EXCEEDED'
  | 'COST_ANALYSIS_LIMIT_EXCEEDED'
  | 'RATE_LIMITED'
  | 'SERVICE_UNAVAILABLE';

/** The error an operation is refused with, before execution. */
export interface OperationRefusal {
  readonly code: OperationRefusalCode;
  /**
   * HTTP status: 400 over `maxCost`, an operation limit or the analysis's step budget, 429 over
   * the budget, 503 when a fail-closed budget's store is down.
   */
  readonly status: 400 | 429 | 503;
  readonly message: string;
  /**
   * `extensions` of the GraphQL error: `code`, and `cost` with `maxCost`, or `retryAfter`
   * (seconds), or `limit`, `measured` and `maximum`.
   */
  readonly extensions: Record<string, unknown>;
  /** The operation's requested cost, in points (0 when refused before it was priced). */
  readonly requested: number;
  /** The budget's decision, when a budget refused. */
  readonly outcome?: RequestOutcome;
}

/** A limit an operation went over: the option's name, the operation's value, the maximum. */
export interface ExceededLimit {
  readonly limit: string;
  readonly measured: number;
  readonly maximum: number;
}

/** The refusal of an operation over `maxCost` points: 400, nothing spent. */
export function tooCostly(requested: number, maxCost: number): OperationRefusal {
  return {
    code: 'MAX_COST_EXCEEDED',
    status: 400,
    message: `Query cost ${requested} exceeds the maximum cost ${maxCost}`,
    extensions: { code: 'MAX_COST_EXCEEDED', cost: requested, maxCost },
    requested,
  };
}

/**
 * The refusal of an operation over an operation limit (`OPERATION_LIMIT_EXCEEDED`) or whose
 * analysis ran out of steps (`COST_ANALYSIS_LIMIT_EXCEEDED`): 400, unpriced, nothing spent.
 * `measured` of the step budget is where the analysis stopped, not the steps it would need.
 */
export function limitRefusal(
  code: 'OPERATION_LIMIT_EXCEEDED' | 'COST_ANALYSIS_LIMIT_EXCEEDED',
  { limit, measured, maximum }: ExceededLimit,
): OperationRefusal {
  const message =
    code === 'OPERATION_LIMIT_EXCEEDED'
      ? `The operation exceeds ${limit}: ${measured} > ${maximum}`
      : `The operation's cost analysis exceeds ${limit} (${maximum})`;
  return {
    code,
    status: 400,
    message,
    extensions: { code, limit, measured, maximum },
    requested: 0,
  };
}
