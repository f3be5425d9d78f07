/**
 * The errors of the cost analysis and of the operation limits, and the limit a document
 * exceeded. A leaf: every other file of lib/graphql may import it.
 */

/** The names of the limits an operation can exceed. */
export type LimitName =
  'maxDepth' | 'maxHeight' | 'maxAliases' | 'maxRootFields' | 'maxAnalysisSteps';

/** One limit an operation exceeded, with what was measured. */
export interface LimitExceeded {
  /** Which limit: an `OperationLimits` field, or `maxAnalysisSteps` (`CostOptions`). */
  readonly limit: LimitName;
  /**
   * What the operation measured: a lower bound of its real value, since the pass stops at the
   * first excess (depth in levels, height in distinct fields, aliases and root fields in fields,
   * analysis steps in selections and values visited).
   */
  readonly measured: number;
  /** The limit's value it exceeded. */
  readonly maximum: number;
}

/**
 * Thrown by `requestedCost` and `actualCost` when the walk would cost more than it may: its step
 * budget (`CostOptions.maxAnalysisSteps`) ran out (`exceeded.limit` is `maxAnalysisSteps`), or
 * the operation nests deeper than the walk follows (`maxDepth`, `MAX_WALK_DEPTH` levels). The
 * client's document is at fault: answer it as a bad request, never as a server error.
 */
export class CostAnalysisLimitError extends Error {
  override readonly name = 'CostAnalysisLimitError';
  constructor(readonly exceeded: LimitExceeded) {
    super(
      `GraphQL cost: the operation exceeds ${exceeded.limit} (${exceeded.measured} > ${exceeded.maximum}); it is not analysed further.`,
    );
  }
}

/**
 * Thrown by `requestedCost`, `actualCost` and `operationLimitExceeded` when the document has no
 * operation to pick: none at all, no operation named `operationName`, or several without an
 * `operationName`. The server's own validation answers these documents: leave them to it.
 */
export class OperationNotFoundError extends Error {
  override readonly name = 'OperationNotFoundError';
}
