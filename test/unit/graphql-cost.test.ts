/**
 * GraphQL operation cost (issue 25, DESIGN §14): the requested cost before execution and the
 * actual cost from `data`, against hand-computed numbers. First the examples of the IBM
 * GraphQL Cost Directive specification and of Apollo Router's demand control docs, each
 * schema and query as published, then every semantic rule on one schema of our own.
 *
 * Our model is Apollo Router's: a field costs (list size) × (its weight + its selections)
 * + its arguments' weights. Where the IBM spec's prose counts a list field's weight once
 * per resolver call instead, its number is quoted beside ours.
 */
import { describe, expect, it } from '@jest/globals';
import type { DocumentNode } from 'graphql';
import {
  actualCost,
  INFERRED_SIZED_FIELDS,
  INFERRED_SLICING_ARGUMENTS,
  requestedCost,
  type CostOptions,
  type OperationInput,
} from '../../lib/graphql/index.js';

const graphql = await import('graphql');
const { buildSchema, parse } = graphql;

/** The IBM spec's directive definitions: `weight` is a `String!` holding a Float. */
const IBM = `
  directive @cost(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR
  directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
`;
/** Apollo Federation's: `weight` is an `Int!`. */
const APOLLO = IBM.replace('weight: String!', 'weight: Int!');

type Schema = OperationInput['schema'];

function cost(
  schema: Schema,
  query: string,
  variables?: Record<string, unknown>,
  options?: CostOptions,
): number {
  return requestedCost(graphql, { schema, document: parse(query), variables }, options);
}

function actual(
  schema: Schema,
  query: string,
  data: unknown,
  variables?: Record<string, unknown>,
  options?: CostOptions,
): number {
  return actualCost(graphql, { schema, document: parse(query), variables, data }, options);
}

/** The spec's raw number where it is 0: without the default minimum of 1 point. */
const RAW: CostOptions = { minimumCost: 0 };

describe('the IBM cost spec examples', () => {
  // IBM §3 Example № 1
  const users = buildSchema(`${IBM}
    type User { name: String  age: Int @cost(weight: "2.0") }
    type Query { users(max: Int): [User] @listSize(slicingArguments: ["max"]) }
  `);
  // IBM §5.3.2.2 Examples № 10 to 13 (the types they leave out: an enum, a Product)
  const products = buildSchema(`${IBM}
    enum Approximate { APPROXIMATE }
    type Product { name: String }
    input Filter { approx: Approximate @cost(weight: "-12.0") }
    directive @approx(tolerance: Float! @cost(weight: "-1.0")) on FIELD
    type Query {
      topProducts(filter: Filter @cost(weight: "15.0")): [String] @cost(weight: "5.0") @listSize(assumedSize: 10)
      mostPopularProduct(approx: Approximate @cost(weight: "-3.0")): Product @cost(weight: "5.0")
    }
  `);

  it('1. Example № 2, users(max: 5) { age }: 15', () => {
    // 5 users × (User 1 + age 2) = 15. (The IBM prose: users resolver 1 + 5 × age 2 = 11.)
    expect(cost(users, 'query Example { users(max: 5) { age } }')).toBe(15);
  });

  it('2. Example № 3, the same query answered with 3 users: actual 9', () => {
    // 3 users × (User 1 + age 2) = 9. (The IBM prose: 1 + 3 × 2 = 7.)
    const data = { users: [{ age: 33 }, { age: 45 }, { age: 27 }] };
    expect(actual(users, 'query Example { users(max: 5) { age } }', data)).toBe(9);
  });

  it('3. Example № 10, topProducts with and without its weighted filter: 50, 65', () => {
    // 10 (assumedSize) × 5 (@cost on the field) = 50. (IBM prose: 5.)
    expect(cost(products, '{ topProducts }')).toBe(50);
    // 50 + filter 15 (its @cost stands for the input object's default 1) = 65. (IBM: 20.)
    expect(cost(products, '{ topProducts(filter: {}) }')).toBe(65);
  });

  it('4. Example № 11, a negative argument weight: 5, then 2', () => {
    // mostPopularProduct 5 + name 0 = 5
    expect(cost(products, '{ mostPopularProduct { name } }')).toBe(5);
    // 5 + approx −3 = 2, as the spec says
    expect(cost(products, '{ mostPopularProduct(approx: APPROXIMATE) { name } }')).toBe(2);
  });

  it('5. Example № 12, an input field weight: 53', () => {
    // 10 × 5 + filter 15 + filter.approx −12 = 53. (IBM prose: 5 + 15 − 12 = 8.)
    expect(cost(products, '{ topProducts(filter: { approx: APPROXIMATE }) }')).toBe(53);
  });

  it('6. Example № 13, a weighted directive argument: 49', () => {
    // 10 × 5 + @approx(tolerance:) −1 = 49
    expect(cost(products, '{ topProducts @approx(tolerance: 0.1) }')).toBe(49);
  });

  it('7. Example № 16, a list of 10 scalars: the spec 0, ours 1 (a root field costs at least 1)', () => {
    // 10 × String 0 = 0: scalars are free (IBM §7.1). The spec's 0 is the raw cost; ours is 1
    // even with `minimumCost: 0`, since every executed root field costs at least 1 point (its
    // resolver runs: a thousand aliases of it must not be free). Was 0 before that rule.
    const schema = buildSchema(`${IBM}
      type Query { topProducts: [String] @listSize(assumedSize: 10) }
    `);
    expect(cost(schema, '{ topProducts }', {}, RAW)).toBe(1);
    expect(cost(schema, '{ topProducts }')).toBe(1);
  });

  it('8. Example № 17, a slicing argument on a list of scalars: the spec 0, ours 1', () => {
    // max: 5 × String 0 = 0, the spec's raw number; the root field's least 1 makes it 1 even
    // with `minimumCost: 0` (was 0)
    const schema = buildSchema(`${IBM}
      type Query { users(max: Int!): [String] @listSize(slicingArguments: ["max"]) }
    `);
    expect(cost(schema, '{ users(max: 5) }', {}, RAW)).toBe(1);
    expect(cost(schema, '{ users(max: 5) }')).toBe(1);
  });

  it('9. Example № 18, a connection sized by first through edges: 12', () => {
    const schema = buildSchema(`${IBM}
      type Film { title: String }
      type PageInfo { hasNextPage: Boolean }
      type FilmEdge { cursor: ID  node: Film }
      type FilmConnection { edges: [FilmEdge]  pageInfo: PageInfo }
      type Query {
        films(first: Int, after: ID, last: Int, before: ID): FilmConnection
          @listSize(slicingArguments: ["first", "last"], sizedFields: ["edges"])
      }
    `);
    const query =
      '{ films(first: 5) { edges { cursor node { title } } pageInfo { hasNextPage } } }';
    // FilmConnection 1 + 5 edges × (FilmEdge 1 + Film 1) + PageInfo 1 = 12
    expect(cost(schema, query)).toBe(12);
  });

  describe("10. Apollo Router's demand control examples", () => {
    const sdl = (address: string) => `${APOLLO}
      type Query {
        book(id: ID): Book
        bestsellers: [Book] @listSize(assumedSize: 5)
        newestAdditions(after: ID, limit: Int!): [Book] @listSize(slicingArguments: ["limit"])
      }
      type Book { title: String  author: Author  publisher: Publisher }
      type Author { name: String }
      type Publisher { name: String  address: Address }
      type Address ${address} { zipCode: Int! }
    `;
    const plain = buildSchema(sdl(''));
    const weighted = buildSchema(sdl('@cost(weight: 5)'));
    const book = 'title author { name } publisher { name address { zipCode } }';

    it('BookQuery: 4, then 8 with Address @cost(weight: 5)', () => {
      // Query 0 + book 1 + author 1 + publisher 1 + address 1 = 4
      expect(cost(plain, `query BookQuery { book(id: 1) { ${book} } }`)).toBe(4);
      // 0 + 1 + 1 + 1 + address 5 = 8
      expect(cost(weighted, `query BookQuery { book(id: 1) { ${book} } }`)).toBe(8);
    });

    it('bestsellers: 40; newestAdditions(limit: 3): 24, limit 7: 56', () => {
      // 5 × (book 1 + author 1 + publisher 1 + address 5) = 40
      expect(cost(weighted, `{ bestsellers { ${book} } }`)).toBe(40);
      // 3 × 8 = 24, 7 × 8 = 56
      expect(cost(weighted, `{ newestAdditions(limit: 3) { ${book} } }`)).toBe(24);
      expect(cost(weighted, `{ newestAdditions(limit: 7) { ${book} } }`)).toBe(56);
    });
  });
});

/** One schema for every rule below; weights as Apollo's `Int!`. */
const schema = buildSchema(`${APOLLO}
  interface Node { id: ID! }
  type User implements Node {
    id: ID!
    name: String
    posts(first: Int, last: Int): [Post!]!
      @listSize(slicingArguments: ["first", "last"], requireOneSlicingArgument: false)
  }
  type Post implements Node {
    id: ID!
    title: String
    author: User!
    comments(first: Int = 5): [Comment!]! @listSize(slicingArguments: ["first"])
  }
  type Comment { id: ID!  body: String }
  type Photo @cost(weight: 3) { id: ID!  url: String }
  union SearchResult = User | Post | Photo
  input PostFilter { tag: String @cost(weight: 2)  since: String }
  type PostEdge { cursor: String  node: Post! }
  type PostConnection { edges: [PostEdge!]!  nodes: [Post!]!  totalCount: Int }
  type Query {
    me: User
    user(id: ID!): User
    node(id: ID!): Node
    search(term: String!, limit: Int): [SearchResult!]! @listSize(slicingArguments: ["limit"])
    grid: [[User]] @listSize(assumedSize: 3)
    connection(first: Int, last: Int): PostConnection
      @listSize(slicingArguments: ["first", "last"], sizedFields: ["edges", "nodes"])
    pagedPosts(first: Int): PostConnection
    tagged(filter: PostFilter): [Post!]! @listSize(assumedSize: 4)
    unannotated(first: Int): [Post!]!
    feed: [Post!]!
  }
  type Mutation { createPost(title: String! @cost(weight: 4)): Post! }
  type Subscription { postAdded: Post! }
`);

describe('requestedCost: the rules', () => {
  it('counts objects 1 and scalars 0, each alias apart', () => {
    expect(cost(schema, '{ me { id name } }')).toBe(1); // User 1 + scalars 0
    expect(cost(schema, '{ a: me { id } b: me { name } c: user(id: 1) { id } }')).toBe(3);
  });

  it('counts named fragments, inline fragments and a fragment spread twice', () => {
    const fragment = 'fragment F on User { posts(first: 2) { id } }';
    // User 1 + 2 posts × Post 1 = 3
    expect(cost(schema, `{ me { ...F } } ${fragment}`)).toBe(3);
    expect(cost(schema, '{ me { ... on User { posts(first: 2) { id } } } }')).toBe(3);
    expect(cost(schema, `{ a: me { ...F } b: me { ...F } } ${fragment}`)).toBe(6);
  });

  it('counts the most expensive member of a union, with only its fragments', () => {
    const query = `{ search(term: "x", limit: 2) {
      ... on User { posts(first: 3) { id } }
      ... on Post { author { id } }
      ... on Photo { url } } }`;
    // per item max(User 1 + 3 × 1 = 4, Post 1 + author 1 = 2, Photo 3) = 4; 2 items × 4 = 8
    expect(cost(schema, query)).toBe(8);
  });

  it('counts the most expensive implementation of an interface', () => {
    // max(User 1, Post 1 + comments (schema default first: 5) × 1 = 6) = 6
    expect(cost(schema, '{ node(id: 1) { id ... on Post { comments { id } } } }')).toBe(6);
  });

  it('leaves out what @include(if: false) and @skip(if: true) exclude, literal or variable', () => {
    const query = `query Q($skip: Boolean = true) {
      me { id }
      user(id: 2) @skip(if: $skip) { posts(first: 50) { id } } }`;
    expect(cost(schema, '{ me { id } user(id: 2) @include(if: false) { id } }')).toBe(1);
    expect(cost(schema, query)).toBe(1); // the variable's default: skipped
    expect(cost(schema, query, { skip: true })).toBe(1);
    // me 1 + user 1 + 50 posts × 1 = 52
    expect(cost(schema, query, { skip: false })).toBe(52);
  });

  it('reads a slicing argument from a variable, else its default, else the list size', () => {
    const sliced = (definition: string) =>
      `query Q(${definition}) { me { posts(first: $n) { id } } }`;
    expect(cost(schema, sliced('$n: Int'), { n: 7 })).toBe(8); // 1 + 7
    expect(cost(schema, sliced('$n: Int = 4'))).toBe(5); // 1 + 4
    expect(cost(schema, sliced('$n: Int'))).toBe(11); // 1 + defaultListSize 10
    expect(cost(schema, sliced('$n: Int'), {}, { defaultListSize: 30 })).toBe(31);
  });

  it('never lets an invalid slicing value lower the cost', () => {
    const query = 'query Q($n: Int) { me { posts(first: $n) { id } } }';
    // each: 1 + the fallback size 10 = 11
    expect(cost(schema, '{ me { posts(first: -1) { id } } }')).toBe(11);
    expect(cost(schema, '{ me { posts(first: null) { id } } }')).toBe(11);
    expect(cost(schema, query, { n: -100 })).toBe(11);
    expect(cost(schema, query, { n: 2.5 })).toBe(11);
    expect(cost(schema, query, { n: '3' })).toBe(11);
    expect(cost(schema, query, { n: null })).toBe(11);
    // first 3 with last -1: the larger of 3 and the fallback 10
    expect(cost(schema, '{ me { posts(first: 3, last: -1) { id } } }')).toBe(11);
    // two valid ones: the larger, 1 + 20
    expect(cost(schema, '{ me { posts(first: 3, last: 20) { id } } }')).toBe(21);
  });

  it('charges a list sliced to 0 its own weight once', () => {
    // me 1 + max(0 × Post 1, Post 1) = 2
    expect(cost(schema, '{ me { posts(first: 0) { id } } }')).toBe(2);
  });

  it('multiplies nested lists, and nested list types', () => {
    // user 1 + 10 posts × (1 + 20 comments × 1) = 211
    const query = '{ user(id: 1) { posts(first: 10) { comments(first: 20) { id } } } }';
    expect(cost(schema, query)).toBe(211);
    // [[User]] with assumedSize 3: 3 × 3 × 1 = 9
    expect(cost(schema, '{ grid { id } }')).toBe(9);
  });

  it('gives the slice to sizedFields (edges, nodes), not to the connection', () => {
    const query = '{ connection(first: 5) { totalCount edges { node { id } } nodes { id } } }';
    // connection 1 + 5 edges × (PostEdge 1 + Post 1) + 5 nodes × Post 1 = 16
    expect(cost(schema, query)).toBe(16);
  });

  it('reads first/last on an unannotated list or connection (the Relay convention)', () => {
    expect(cost(schema, '{ unannotated(first: 100) { id } }')).toBe(100); // 100 × 1
    expect(cost(schema, '{ feed { id } }')).toBe(10); // defaultListSize 10 × 1
    // connection 1 + 3 edges × (1 + 1) = 7
    expect(cost(schema, '{ pagedPosts(first: 3) { edges { node { id } } } }')).toBe(7);
  });

  it('adds argument and input field weights when given', () => {
    // 4 posts × 1 = 4, + filter (input object 1 + tag 2) = 7
    expect(cost(schema, '{ tagged(filter: { tag: "a" }) { id } }')).toBe(7);
    expect(cost(schema, '{ tagged(filter: { since: "a" }) { id } }')).toBe(5); // 4 + 1
    expect(cost(schema, '{ tagged { id } }')).toBe(4);
    const query = 'query Q($f: PostFilter) { tagged(filter: $f) { id } }';
    expect(cost(schema, query, { f: { tag: 'a', since: 'b' } })).toBe(7);
    expect(cost(schema, query)).toBe(4); // not sent: nothing given
  });

  it('adds the mutation base cost (10 by default) and argument weights', () => {
    // mutation 10 + title 4 + Post 1 = 15
    expect(cost(schema, 'mutation { createPost(title: "x") { id } }')).toBe(15);
    const options = { operationTypeCost: { mutation: 0 } };
    expect(cost(schema, 'mutation { createPost(title: "x") { id } }', {}, options)).toBe(5);
    expect(cost(schema, 'subscription { postAdded { id } }')).toBe(1); // 0 + Post 1
  });

  it('counts __schema and __type like other fields, __typename for nothing', () => {
    expect(cost(schema, '{ __typename me { __typename } }')).toBe(1);
    // __Type 1 + fields (10 by default) × __Field 1 = 11
    expect(cost(schema, '{ __type(name: "User") { name fields { name } } }')).toBe(11);
    // __Schema 1 + queryType 1 = 2
    expect(cost(schema, '{ __schema { queryType { name } } }')).toBe(2);
    const free = { countIntrospection: false };
    expect(cost(schema, '{ __schema { types { name } } me { id } }', {}, free)).toBe(1);
  });

  it('picks the operation by name, and throws for an unknown or missing one', () => {
    const document = 'query A { me { id } } query B { a: me { id } b: me { id } }';
    expect(requestedCost(graphql, { schema, document: parse(document), operationName: 'B' })).toBe(
      2,
    );
    expect(() =>
      requestedCost(graphql, { schema, document: parse(document), operationName: 'C' }),
    ).toThrow('no operation named "C"');
    expect(() => requestedCost(graphql, { schema, document: parse(document) })).toThrow(
      'several operations',
    );
  });

  it('ends on a fragment cycle, and saturates at Number.MAX_SAFE_INTEGER', () => {
    const cycle = '{ me { ...A } } fragment A on User { id ...B } fragment B on User { ...A }';
    expect(cost(schema, cycle)).toBe(1);
    const huge =
      '{ user(id: 1) { posts(first: 1000000000) { comments(first: 1000000000) { id } } } }';
    expect(cost(schema, huge)).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('50 aliases of a 100-post list with an author each cost 10,000', () => {
    const posts = buildSchema(`
      type Query { posts(first: Int): [Post!]! }
      type Post { id: ID!  author: Author! }
      type Author { id: ID! }
    `);
    const aliases = Array.from(
      { length: 50 },
      (_, i) => `p${i}: posts(first: 100) { id author { id } }`,
    );
    // 50 aliases × 100 posts × (Post 1 + Author 1) = 10,000
    expect(cost(posts, `{ ${aliases.join(' ')} }`)).toBe(10_000);
  });
});

describe('actualCost', () => {
  it('counts lists at the length the response holds, beyond the size requested too', () => {
    const query = '{ me { posts(first: 10) { id } } }';
    expect(cost(schema, query)).toBe(11);
    const posts = (n: number) => ({
      me: { posts: Array.from({ length: n }, (_, id) => ({ id })) },
    });
    expect(actual(schema, query, posts(3))).toBe(4); // 1 + 3
    // 1 + 50: a resolver that returned 50 posts ran them all (was capped at 10: 11)
    expect(actual(schema, query, posts(50))).toBe(51);
    expect(actual(schema, query, posts(0))).toBe(2); // 1 + the list's own weight 1
  });

  it('costs a null value its own weight, nothing below it', () => {
    const query = '{ user(id: 1) { posts(first: 10) { comments(first: 20) { id } } } }';
    expect(actual(schema, query, { user: null })).toBe(1);
    expect(actual(schema, query, null)).toBe(1); // nothing ran: the minimum, 1
    expect(actual(schema, query, null, {}, RAW)).toBe(0); // the query's base cost
    expect(actual(schema, 'mutation { createPost(title: "x") { id } }', null)).toBe(10);
  });

  it('reads response keys by alias, and fragments against the same object', () => {
    const query =
      '{ a: me { ...F } b: me { id } } fragment F on User { p: posts(first: 5) { id } }';
    const data = { a: { p: [{ id: 1 }, { id: 2 }] }, b: { id: 3 } };
    expect(actual(schema, query, data)).toBe(4); // a 1 + 2 posts + b 1
  });

  it('takes an abstract value at its __typename, else the most expensive type', () => {
    const query = `{ search(term: "x", limit: 2) { t: __typename
      ... on User { posts(first: 3) { id } } ... on Photo { url } } }`;
    expect(cost(schema, query)).toBe(8); // 2 × max(User 4, Post 1, Photo 3)
    const data = {
      search: [
        { t: 'Photo', url: 'u' },
        { t: 'User', posts: [{ id: 1 }] },
      ],
    };
    expect(actual(schema, query, data)).toBe(5); // Photo 3 + User (1 + 1 post)
    // without __typename each item counts as its most expensive reading: max(User 1 + 0
    // posts, Post 1, Photo 3) = 3 and max(User 1 + 1 post, Post 1, Photo 3) = 3
    const untyped = { search: [{ url: 'u' }, { posts: [{ id: 1 }] }] };
    expect(actual(schema, query.replace('t: __typename', ''), untyped)).toBe(6);
  });

  it('is the requested cost when the response holds what was requested, more when it holds more', () => {
    const query = '{ connection(first: 2) { edges { node { id } } nodes { id } } }';
    const items = (n: number) => Array.from({ length: n }, (_, id) => ({ id, node: { id } }));
    const requested = cost(schema, query);
    expect(requested).toBe(7); // 1 + 2 × 2 + 2 × 1
    const exact = { connection: { edges: items(2), nodes: items(2) } };
    expect(actual(schema, query, exact)).toBe(requested);
    // 9 edges and 9 nodes returned: 1 + 9 × 2 + 9 × 1 = 28 (was capped at the requested 7)
    const many = { connection: { edges: items(9), nodes: items(9) } };
    expect(actual(schema, query, many)).toBe(28);
  });
});

describe('slicing arguments on an unannotated list', () => {
  const paged = buildSchema(`
    type Post { id: ID! }
    type PostConnection { edges: [Post!]!  nodes: [Post!]! }
    type Query {
      posts(limit: Int): [Post!]!
      taken(take: Int, skip: Int): [Post!]!
      pages(pageSize: Int!, perPage: Int, top: Int): [Post!]!
      stringly(limit: String): [Post!]!
      listed(limit: [Int]): [Post!]!
      connection(limit: Int): PostConnection
    }
  `);

  it('recognises first, last, limit, take, pageSize, perPage and top', () => {
    expect(INFERRED_SLICING_ARGUMENTS).toEqual([
      'first',
      'last',
      'limit',
      'take',
      'pageSize',
      'perPage',
      'top',
    ]);
    expect(INFERRED_SIZED_FIELDS).toEqual(['edges', 'nodes']);
    // 10,000 posts × Post 1, not defaultListSize 10 × 1
    expect(cost(paged, '{ posts(limit: 10000) { id } }')).toBe(10_000);
    expect(cost(paged, '{ posts { id } }')).toBe(10); // not given: defaultListSize
    expect(cost(paged, '{ taken(take: 500, skip: 9) { id } }')).toBe(500);
    // several given: the largest
    expect(cost(paged, '{ pages(pageSize: 20, perPage: 30, top: 40) { id } }')).toBe(40);
    // connection 1 + 50 edges × 1 + 50 nodes × 1
    expect(cost(paged, '{ connection(limit: 50) { edges { id } nodes { id } } }')).toBe(101);
  });

  it('only as Int arguments', () => {
    expect(cost(paged, '{ stringly(limit: "10000") { id } }')).toBe(10);
    expect(cost(paged, '{ listed(limit: [10000]) { id } }')).toBe(10);
  });
});

describe('minimumCost and rounding', () => {
  const small = buildSchema(`${IBM}
    type User { id: ID!  age: Int @cost(weight: "0.5") }
    type Parts { a: Int @cost(weight: "0.7")  b: Int @cost(weight: "2.2")  c: Int @cost(weight: "0.1") }
    type Query {
      version: String
      users(max: Int): [User!]! @listSize(slicingArguments: ["max"])
      parts: Parts @cost(weight: "0")
    }
  `);

  it('charges at least 1 point by default, even for scalars or __typename only', () => {
    for (const query of ['{ version }', '{ __typename }']) {
      expect(cost(small, query)).toBe(1);
      expect(actual(small, query, { version: '1' })).toBe(1);
      expect(actual(small, query, null)).toBe(1);
    }
    // the raw cost: `version` is a root field whose resolver runs, at least 1 point (was 0);
    // `__typename` runs none and is free
    expect(cost(small, '{ version }', {}, RAW)).toBe(1);
    expect(actual(small, '{ version }', { version: '1' }, {}, RAW)).toBe(1);
    expect(cost(small, '{ __typename }', {}, RAW)).toBe(0);
    expect(actual(small, '{ __typename }', { __typename: 'Query' }, {}, RAW)).toBe(0);
    expect(cost(small, '{ version }', {}, { minimumCost: 5 })).toBe(5);
    expect(actual(small, '{ version }', {}, {}, { minimumCost: 5 })).toBe(5);
    // a cost above the minimum is unchanged; an invalid minimum is the default 1
    expect(cost(small, '{ users(max: 3) { id } }', {}, { minimumCost: 2 })).toBe(3);
    expect(cost(small, '{ version }', {}, { minimumCost: -1 })).toBe(1);
    expect(cost(small, '{ version }', {}, { minimumCost: Number.NaN })).toBe(1);
  });

  it('rounds fractional weights up to whole points', () => {
    // 3 users × (User 1 + age 0.5) = 4.5: 5
    expect(cost(small, '{ users(max: 3) { age } }')).toBe(5);
    // 1 user returned: 1.5, 2
    expect(actual(small, '{ users(max: 3) { age } }', { users: [{ age: 1 }] })).toBe(2);
    // 0.7 + 2.2 + 0.1 adds up to 3.0000000000000004 in floats: 3, not 4
    expect(cost(small, '{ parts { a b c } }')).toBe(3);
    expect(actual(small, '{ parts { a b c } }', { parts: { a: 1, b: 2, c: 3 } })).toBe(3);
  });
});

/** A parsed document whose selection sets count how often the analysis reads them. */
function counted(query: string): { document: DocumentNode; reads: () => number } {
  let reads = 0;
  const wrap = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(wrap);
    if (typeof value !== 'object' || value === null) return value;
    const copy: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value)) {
      const wrapped = wrap(child);
      copy[key] =
        key === 'selectionSet' && wrapped
          ? new Proxy(wrapped as object, {
              get(target, property, receiver) {
                if (property === 'selections') reads++;
                return Reflect.get(target, property, receiver) as unknown;
              },
            })
          : wrapped;
    }
    return copy;
  };
  const document = wrap(parse(query, { noLocation: true })) as DocumentNode;
  return { document, reads: () => reads };
}

/** `data` whose objects count how often the analysis reads a property of them. */
function countedData(data: unknown): { data: unknown; reads: () => number } {
  let reads = 0;
  const wrap = (value: unknown): unknown => {
    if (typeof value !== 'object' || value === null) return value;
    const copy: object = Array.isArray(value)
      ? value.map(wrap)
      : Object.fromEntries(Object.entries(value).map(([k, v]) => [k, wrap(v)]));
    return new Proxy(copy, {
      get(target, property, receiver) {
        reads++;
        return Reflect.get(target, property, receiver) as unknown;
      },
      getOwnPropertyDescriptor(target, property) {
        reads++;
        return Reflect.getOwnPropertyDescriptor(target, property);
      },
    });
  };
  return { data: wrap(data), reads: () => reads };
}

describe('walks linear in depth on nested abstract types', () => {
  it('actualCost on nested interface lists without __typename: depth 22, 60', () => {
    // The failing input: 22 levels took 10.8 s (each level walked once per implementation).
    const characters = buildSchema(`
      interface Character { id: ID! friends(first: Int): [Character!]! }
      type Human implements Character { id: ID! friends(first: Int): [Character!]! home: String }
      type Droid implements Character { id: ID! friends(first: Int): [Character!]! fn: String }
      type Query { hero: Character }
    `);
    const run = (depth: number) => {
      let query = 'id';
      for (let i = 0; i < depth; i++) query = `friends(first: 1) { ${query} }`;
      query = `{ hero { ${query} } }`;
      let chain: unknown = { id: '1' };
      for (let i = 0; i < depth; i++) chain = { friends: [chain] };
      const { data, reads } = countedData({ hero: chain });
      expect(graphql.validate(characters, parse(query))).toEqual([]);
      const requested = cost(characters, query);
      const value = actual(characters, query, data);
      return { requested, value, reads: reads() };
    };
    // linear: a bounded number of property reads per level (it was 2^depth). Depth 10
    // first, so that an exponential walk fails here instead of hanging the suite.
    const at10 = run(10);
    expect(at10).toMatchObject({ requested: 11, value: 11 });
    expect(at10.reads).toBeLessThan(20 * 10);
    // hero 1 + one friend (Character 1) per level
    const at22 = run(22);
    expect(at22).toMatchObject({ requested: 23, value: 23 });
    expect(at22.reads).toBeLessThan(20 * 22);
    const at60 = run(60);
    expect(at60).toMatchObject({ requested: 61, value: 61 });
    expect(at60.reads).toBeLessThan(20 * 60);
  });

  it('requestedCost on connections typed as interfaces, sized by first: depth 13, 60', () => {
    // The failing input: 13 levels took 3.7 s (the sized walk was never remembered).
    const connections = buildSchema(`
      interface Conn { edges: [Edge!]! }
      type ConnA implements Conn { edges: [Edge!]! }
      type ConnB implements Conn { edges: [Edge!]! }
      type ConnC implements Conn { edges: [Edge!]! }
      type Edge { node: User! }
      type User { id: ID! friends(first: Int): Conn! }
      type Query { me: User }
    `);
    const run = (depth: number) => {
      let query = 'id';
      for (let i = 0; i < depth; i++) query = `friends(first: 1) { edges { node { ${query} } } }`;
      const { document, reads } = counted(`{ me { ${query} } }`);
      expect(graphql.validate(connections, parse(`{ me { ${query} } }`))).toEqual([]);
      return { value: requestedCost(graphql, { schema: connections, document }), reads: reads() };
    };
    // 4 selection sets per level, each read once per possible type (3): linear. Depth 8
    // first, so that an exponential walk fails here instead of hanging the suite.
    const at8 = run(8);
    expect(at8.value).toBe(1 + 8 * 3);
    expect(at8.reads).toBeLessThan(20 * 8);
    // me 1 + per level: Conn 1 + 1 edge × (Edge 1 + User 1)
    const at13 = run(13);
    expect(at13.value).toBe(1 + 13 * 3);
    expect(at13.reads).toBeLessThan(20 * 13);
    const at60 = run(60);
    expect(at60.value).toBe(1 + 60 * 3);
    expect(at60.reads).toBeLessThan(20 * 60);
  });

  it('remembers a selection set per handed-down size, not across sizes', () => {
    const connections = buildSchema(`
      interface Conn { edges: [Edge!]! }
      type ConnA implements Conn { edges: [Edge!]! }
      type ConnB implements Conn { edges: [Edge!]! }
      type Edge { node: User! }
      type User { id: ID! friends(first: Int): Conn! }
      type Query { me: User }
    `);
    const query = `{ me { a: friends(first: 1) { ...F } b: friends(first: 5) { ...F } } }
      fragment F on Conn { edges { node { id } } }`;
    // me 1 + (Conn 1 + 1 × (Edge 1 + User 1)) + (Conn 1 + 5 × 2) = 1 + 3 + 11
    expect(cost(connections, query)).toBe(15);
  });
});

describe('actual cost: the type comes from the real __typename, never a field aliased so', () => {
  const results = buildSchema(`
    type Cheap { id: ID!  title: String  label: String! }
    type Expensive { id: ID!  title: String  label: String!  items(first: Int): [Item!]! }
    type Item { id: ID! }
    union Result = Cheap | Expensive
    type Query { search: [Result!]! }
  `);
  const expensive = (title: string) =>
    Array.from({ length: 10 }, (_, i) => ({
      __typename: 'Expensive',
      id: i,
      title,
      label: title,
      items: Array.from({ length: 100 }, (_, j) => ({ id: j })),
    }));

  it('never reads another field aliased __typename', async () => {
    // The failing input: 10 Expensive results whose title says "Cheap", aliased __typename.
    const query = '{ search { ... on Expensive { __typename: title items(first: 100) { id } } } }';
    const document = parse(query);
    expect(graphql.validate(results, document)).toEqual([]);
    const result = await graphql.execute({
      schema: results,
      document,
      rootValue: { search: () => expensive('Cheap') },
    });
    expect((result.data?.['search'] as { __typename: string }[])[0]?.__typename).toBe('Cheap');
    // 10 (defaultListSize) × max(Cheap 1, Expensive 1 + 100 items) = 1010
    expect(cost(results, query)).toBe(1010);
    expect(actual(results, query, result.data)).toBe(1010); // was 10
  });

  it('nor a key that is __typename in one fragment and another field in the other', () => {
    const query = `{ search {
      ... on Cheap { k: __typename }
      ... on Expensive { k: label items(first: 100) { id } } } }`;
    expect(graphql.validate(results, parse(query))).toEqual([]);
    const data = { search: expensive('Cheap').map(({ label, items }) => ({ k: label, items })) };
    expect(actual(results, query, data)).toBe(1010);
  });

  it('reads the real __typename under any alias, when it names a possible type', () => {
    const query = '{ search { t: __typename ... on Expensive { items(first: 100) { id } } } }';
    const cheap = { search: Array.from({ length: 10 }, (_, id) => ({ t: 'Cheap', id })) };
    expect(actual(results, query, cheap)).toBe(10); // 10 × Cheap 1: the refund stays
    const plain = query.replace('t: __typename', '__typename');
    const typed = { search: cheap.search.map(({ id }) => ({ __typename: 'Cheap', id })) };
    expect(actual(results, plain, typed)).toBe(10);
    // a name that is no possible type of Result: the most expensive reading, 10 × (1 + 100)
    const stray = { search: expensive('x').map(({ items }) => ({ t: 'Item', items })) };
    expect(actual(results, query, stray)).toBe(1010);
    // no __typename selected at all: the most expensive reading
    const none = '{ search { ... on Expensive { items(first: 100) { id } } } }';
    const untyped = { search: expensive('x').map(({ items }) => ({ __typename: 'Cheap', items })) };
    expect(actual(results, none, untyped)).toBe(1010);
  });
});
