/**
 * The documents that made the GraphQL cost analysis costlier than the request (issue 32), and a
 * normal 20-field query to compare with, on one schema. Pure: no import, so that the bench and
 * the unit tests' CPU worker (test/unit/graphql-cpu-worker.ts) share them.
 */

export const SDL = `
type Author { id: Int! name: String! }
type Item { id: Int! name: String! price: Float! author: Author! next: Item }
type Conn { total: Int edges: [Item!]! nodes: [Item!]! }
type Query {
  ${Array.from({ length: 20 }, (_, i) => `f${i}(first: Int): [Item!]!`).join('\n  ')}
  conn(first: Int): Conn
  node: Item
}
`;

export interface BenchDocument {
  readonly name: string;
  readonly query: string;
  /** A response's `data` for the actual cost, as execution would give it. */
  readonly data: Record<string, unknown>;
  /** The root value that makes graphql-js's default resolvers return `data`. */
  readonly root: Record<string, unknown>;
}

const ITEMS = [1, 2, 3].map((id) => ({
  id,
  name: `item ${id}`,
  price: id * 1.5,
  author: { id, name: `author ${id}` },
}));

/** 20 root fields, each a list of 3 items with a nested object: the bench's normal query. */
function normalQuery(): BenchDocument {
  const fields = Array.from({ length: 20 }, (_, i) => i);
  return {
    name: 'normal 20-field query',
    query: `{ ${fields.map((i) => `f${i}(first: 5) { id name price author { id name } }`).join(' ')} }`,
    data: Object.fromEntries(fields.map((i) => [`f${i}`, ITEMS])),
    root: Object.fromEntries(fields.map((i) => [`f${i}`, ITEMS])),
  };
}

/** `query Q { ...F1 }`: each of F1..F(levels-1) spreads the next ten times, the last is `{ __typename }`. */
export function fragmentChain(levels: number): BenchDocument {
  let query = 'query Q{...F1}';
  for (let i = 1; i < levels; i++)
    query += `fragment F${i} on Query{${`...F${i + 1} `.repeat(10)}}`;
  query += `fragment F${levels} on Query{__typename}`;
  return { name: `F-chain, ${levels} levels`, query, data: { __typename: 'Query' }, root: {} };
}

/**
 * `aliases` aliases of `conn(first: N) { ...A1 }`, each N different, and a chain of
 * `fragments` fragments on the connection type (`fragment Ai on Conn { total ...Ai+1 }`); with
 * `sized`, the chain is on the items of `edges` instead.
 */
export function aliasesTimesFragments(
  aliases: number,
  fragments: number,
  sized = false,
): BenchDocument {
  const type = sized ? 'Item' : 'Conn';
  const body = sized ? 'edges{...A1}' : '...A1';
  let query = '{';
  for (let i = 0; i < aliases; i++) query += `a${i}:conn(first:${i + 1}){${body}}`;
  query += '}';
  for (let i = 1; i < fragments; i++) {
    query += `fragment A${i} on ${type}{${sized ? 'id' : 'total'} ...A${i + 1}}`;
  }
  query += `fragment A${fragments} on ${type}{${sized ? 'id' : 'total'}}`;
  const value = sized ? { edges: [{ id: 1 }] } : { total: 1 };
  const data = Object.fromEntries(Array.from({ length: aliases }, (_, i) => [`a${i}`, value]));
  const kb = Math.round(query.length / 1000);
  return {
    name: `${aliases} aliases × ${fragments} fragments${sized ? ' (sized)' : ''}, ${kb} KB`,
    query,
    data,
    root: { conn: value },
  };
}

/** `{ node { next { next ... { id } } } }`, `levels` fields deep. */
function nested(levels: number): BenchDocument {
  const query = `{node{${'next{'.repeat(levels - 2)}id${'}'.repeat(levels - 1)}}`;
  let data: Record<string, unknown> = { id: 1 };
  for (let level = levels - 1; level >= 2; level--) data = { next: data };
  return { name: `${levels}-level nesting`, query, data: { node: data }, root: { node: data } };
}

/** Every document of the bench and of the CPU test, the adversarial ones after the normal one. */
export function benchDocuments(): BenchDocument[] {
  return [
    normalQuery(),
    fragmentChain(8),
    fragmentChain(9),
    aliasesTimesFragments(1600, 1350),
    aliasesTimesFragments(2500, 300),
    aliasesTimesFragments(1200, 1100, true),
    nested(2000),
  ];
}
