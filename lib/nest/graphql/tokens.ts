/** The module's `OperationCosts` (null without a `graphql` option). */
export const OPERATION_COSTS = Symbol.for('nest-rate-limit:operation-costs');
