// A registered symbol: a context marked by a CommonJS copy of the package is recognised by an
// ESM copy too.
const CHARGED = Symbol.for('nest-rate-limit:operation-charged');

/**
 * Marks a GraphQL context whose operations the server's hooks price (the Apollo plugin, the
 * Mercurius hooks): `OperationCostGuard` leaves their fields alone.
 */
export function markCharged(contextValue: unknown): void {
  if (typeof contextValue === 'object' && contextValue !== null) {
    (contextValue as { [CHARGED]?: true })[CHARGED] = true;
  }
}

/** Whether the server's hooks price the operations of this context. */
export function isCharged(contextValue: unknown): boolean {
  return (
    typeof contextValue === 'object' &&
    contextValue !== null &&
    (contextValue as { [CHARGED]?: true })[CHARGED] === true
  );
}
