/**
 * Operation limits: depth, height, aliases and root fields measured as Apollo Router measures
 * them (its documented examples first), fragments counted at every spread, and the pass
 * iterative so that no nesting overflows the stack.
 */
import { describe, expect, it } from '@jest/globals';
import type { DocumentNode, FieldNode, SelectionSetNode } from 'graphql';
import {
  DEFAULT_OPERATION_LIMITS,
  operationLimitExceeded,
  OperationNotFoundError,
  type OperationLimits,
} from '../../lib/graphql/index.js';

const graphql = await import('graphql');
const { buildSchema, parse } = graphql;

const schema = buildSchema(`
  interface ProductDetails { country: String }
  type ProductDetailsBook implements ProductDetails { country: String }
  type Book { details: ProductDetails title: String }
  type User { id: ID name: String friend: User }
  type Query { book: Book user: User hello: String }
`);

function exceeded(query: string, limits: OperationLimits, operationName?: string) {
  return operationLimitExceeded(graphql, { schema, document: parse(query), operationName }, limits);
}

/** The value of one measure: the smallest maximum it does not exceed. */
function measure(query: string, limit: keyof OperationLimits): number {
  const found = exceeded(query, { [limit]: 0 });
  if (!found) return 0;
  // measured is a lower bound at the first excess; find the real value by bisection.
  let low = found.measured;
  let high = Number.MAX_SAFE_INTEGER;
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    if (exceeded(query, { [limit]: mid })) low = mid + 1;
    else high = mid;
  }
  return low;
}

const GET_BOOK = `
  query GetBook { book { ...bookDetails } }
  fragment bookDetails on Book { details { ... on ProductDetailsBook { country } } }
`;
const GET_USER_HEIGHT = 'query GetUser { user { id name username: name } }';
const GET_USER_ALIASES = 'query GetUser { user { nickname: name username: name handle: name } }';

describe('Apollo Router documented examples', () => {
  it('GetBook has depth three (book 1, details 2 through a fragment, country 3)', () => {
    expect(measure(GET_BOOK, 'maxDepth')).toBe(3);
    expect(exceeded(GET_BOOK, { maxDepth: 3 })).toBeUndefined();
    expect(exceeded(GET_BOOK, { maxDepth: 2 })).toEqual({
      limit: 'maxDepth',
      measured: 3,
      maximum: 2,
    });
  });

  it('GetUser has height three (user, id, name; the aliased duplicate is not counted)', () => {
    expect(measure(GET_USER_HEIGHT, 'maxHeight')).toBe(3);
    // the same name in another selection set counts again: user, friend, id, id
    expect(measure('{ user { id friend { id } } }', 'maxHeight')).toBe(4);
  });

  it('GetUser has three aliases', () => {
    expect(measure(GET_USER_ALIASES, 'maxAliases')).toBe(3);
  });

  it('root fields count root-level fragments, each distinct field once', () => {
    const query = `{ hello a: hello hello ...Q ... on Query { book { title } } }
      fragment Q on Query { user { id } }`;
    // hello (its alias a not again), user (fragment), book (inline fragment): 3
    expect(measure(query, 'maxRootFields')).toBe(3);
  });
});

describe('fragments count at every spread, measured once', () => {
  // F1..F8: each spreads the next ten times; F9 is { __typename }.
  const chain = (levels: number): string => {
    let doc = 'query Q { ...F1 }\n';
    for (let i = 1; i < levels; i++) {
      doc += `fragment F${i} on Query { ${Array.from({ length: 10 }, () => `...F${i + 1}`).join(' ')} }\n`;
    }
    return doc + `fragment F${levels} on Query { __typename }\n`;
  };

  it('the nine-level chain has 10^8 root fields by the spread, refused at once', () => {
    expect(exceeded(chain(9), DEFAULT_OPERATION_LIMITS)).toEqual({
      limit: 'maxRootFields',
      // the pass stops at the first excess: F6 has spread F7 (100 root fields) twice
      measured: 200,
      maximum: 100,
    });
    expect(measure(chain(9), 'maxRootFields')).toBe(1e8);
    expect(exceeded(chain(9), { maxDepth: 1 })).toBeUndefined();
  });
});

describe('nesting', () => {
  /** `{ user { friend { friend ... { id } } } }`, `levels` fields deep, built without the parser (whose recursion is the limit in Jest's smaller stack). */
  const nested = (levels: number): DocumentNode => {
    const { Kind } = graphql;
    const field = (name: string, set?: SelectionSetNode): FieldNode => ({
      kind: Kind.FIELD,
      name: { kind: Kind.NAME, value: name },
      ...(set && { selectionSet: set }),
    });
    const wrap = (selection: FieldNode): SelectionSetNode => ({
      kind: Kind.SELECTION_SET,
      selections: [selection],
    });
    let inner = field('id');
    for (let level = levels - 1; level >= 1; level--) {
      inner = field(level === 1 ? 'user' : 'friend', wrap(inner));
    }
    return {
      kind: Kind.DOCUMENT,
      definitions: [
        {
          kind: Kind.OPERATION_DEFINITION,
          operation: graphql.OperationTypeNode.QUERY,
          selectionSet: wrap(inner),
        },
      ],
    };
  };
  const limit = (document: DocumentNode, limits: OperationLimits) =>
    operationLimitExceeded(graphql, { schema, document }, limits);

  it('a 2,000-level selection is measured without recursion and refused at maxDepth + 1', () => {
    expect(limit(nested(2000), { maxDepth: 64 })).toEqual({
      limit: 'maxDepth',
      measured: 65,
      maximum: 64,
    });
    expect(limit(nested(2000), { maxDepth: 1999 })).toEqual({
      limit: 'maxDepth',
      measured: 2000,
      maximum: 1999,
    });
    expect(limit(nested(100_000), {})).toBeUndefined();
  });
});

describe('documents without an operation to pick', () => {
  it('an unknown operationName throws OperationNotFoundError', () => {
    expect(() => exceeded('query A { hello }', {}, 'B')).toThrow(OperationNotFoundError);
    expect(() => exceeded('query A { hello } query B { hello }', {})).toThrow(
      OperationNotFoundError,
    );
  });
});

describe('defaults', () => {
  it('the GraphiQL introspection query stays far below every default', () => {
    const query = graphql.getIntrospectionQuery();
    expect(exceeded(query, DEFAULT_OPERATION_LIMITS)).toBeUndefined();
    expect({
      depth: measure(query, 'maxDepth'),
      height: measure(query, 'maxHeight'),
      aliases: measure(query, 'maxAliases'),
      rootFields: measure(query, 'maxRootFields'),
    }).toEqual({ depth: 15, height: 220, aliases: 0, rootFields: 1 });
  });
});
