/**
 * GraphQL operation cost: no Nest, no Redis; the app's own `graphql` runtime is passed in.
 *
 * Nothing in lib/graphql imports `graphql` at runtime: it is an optional peer that the main
 * entry must not require, and the app's copy is the one whose classes its schema was built
 * with (a second copy fails graphql-js's "another module or realm" `instanceof` checks).
 */
import type * as GraphQL from 'graphql';

/**
 * The part of the `graphql` module the cost analysis calls: pass the app's own module,
 * `await import('graphql')` (or `require('graphql')`), graphql-js 16 or later.
 *
 * Listed exactly, so that a stub or another implementation knows what to provide.
 */
export type GraphQLRuntime = Pick<
  typeof GraphQL,
  | 'Kind'
  | 'getNamedType'
  | 'getNullableType'
  | 'isListType'
  | 'isNonNullType'
  | 'isLeafType'
  | 'isObjectType'
  | 'isAbstractType'
  | 'isInterfaceType'
  | 'isInputObjectType'
  | 'SchemaMetaFieldDef'
  | 'TypeMetaFieldDef'
>;
