/**
 * `nest-rate-limit/graphql`: the code-first cost decorators (`Cost`, `ListSize`, which load
 * `@nestjs/graphql`) and the operation cost analysis on its own (no Nest, no Redis, the app's
 * `graphql` passed in). The main entry never imports this file: the module's operation cost
 * reaches `cost.ts` directly, so an app without GraphQL loads none of it.
 */
export {
  actualCost,
  DEFAULT_LIST_SIZE,
  DEFAULT_OPERATION_TYPE_COST,
  requestedCost,
  type CostOptions,
  type OperationInput,
  type OperationTypeCost,
} from './cost.js';
export type { GraphQLRuntime } from './runtime.js';
export {
  COST_EXTENSION,
  LIST_SIZE_EXTENSION,
  type CostExtension,
  type ListSizeExtension,
} from './weights.js';
export { Cost, ListSize, type CostDecorator } from './decorators.js';
