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

const PRICED = Symbol.for('nest-rate-limit:operation-priced');

/**
 * Marks the operations of a document a server hook priced as a whole (graphql-ws): its
 * resolvers see the document's own operation node, whatever their context is.
 */
export function markPriced(document: { readonly definitions: readonly object[] }): void {
  for (const definition of document.definitions) {
    (definition as { [PRICED]?: true })[PRICED] = true;
  }
}

/** Whether the operation (`info.operation`) was priced as a whole by a server hook. */
export function isPriced(operation: unknown): boolean {
  return (
    typeof operation === 'object' &&
    operation !== null &&
    (operation as { [PRICED]?: true })[PRICED] === true
  );
}
