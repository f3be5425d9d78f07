/**
 * `nest-rate-limit/graphql`: the operation cost analysis (`requestedCost`, `actualCost`), the
 * operation limits (`operationLimitExceeded`) and
 * the code-first cost decorators (`Cost`, `ListSize`). The analysis itself is pure: it uses no
 * Nest and no Redis, and calls the app's own `graphql` module passed in as `runtime`. This
 * entry is not Nest-free, though: it re-exports decorators.ts, which imports
 * `@nestjs/graphql` (and with it `@nestjs/common` and `graphql`), so importing it needs those
 * installed. The main entry never imports this file: the module's operation cost reaches
 * `cost.ts` directly, so an app without GraphQL loads none of it.
 */
export {
  actualCost,
  DEFAULT_LIST_SIZE,
  DEFAULT_MAX_ANALYSIS_STEPS,
  DEFAULT_MINIMUM_COST,
  DEFAULT_OPERATION_TYPE_COST,
  requestedCost,
  type CostOptions,
  type OperationInput,
  type OperationTypeCost,
} from './cost.js';
export {
  CostAnalysisLimitError,
  DEFAULT_OPERATION_LIMITS,
  operationLimitExceeded,
  OperationNotFoundError,
  type LimitExceeded,
  type LimitName,
  type OperationLimits,
} from './limits.js';
export { INFERRED_SIZED_FIELDS, INFERRED_SLICING_ARGUMENTS, MAX_WALK_DEPTH } from './walk-state.js';
export type { GraphQLRuntime } from './runtime.js';
export { UNKNOWN_SLICE_SIZE } from './arguments.js';
export {
  COST_EXTENSION,
  LIST_SIZE_EXTENSION,
  type CostExtension,
  type ListSizeExtension,
} from './weights.js';
export { Cost, ListSize, type CostDecorator } from './decorators.js';
