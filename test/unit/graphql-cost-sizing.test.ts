/**
 * Sizing that follows the data, and prices that follow the work: Apollo Router's list-size
 * rules (slicing arguments by dot path into inputs and variables, list-argument lengths, nested
 * `sizedFields`, `@link` renames of the cost directives), page objects, every root field at
 * least 1 point and a mutation's type cost per mutation field. Each number hand-computed in a
 * comment: a list of n items costs n × (its type's weight + its selections).
 */
import { describe, expect, it } from '@jest/globals';
import type { DocumentNode, FieldNode, SelectionSetNode } from 'graphql';
import { aliasesTimesFragments, fragmentChain, SDL } from '../../bench/graphql/documents.js';

import {
  CostAnalysisLimitError,
  MAX_WALK_DEPTH,
  OperationNotFoundError,
  requestedCost,
  actualCost,
  UNKNOWN_SLICE_SIZE,
  type CostOptions,
  type OperationInput,
} from '../../lib/graphql/index.js';

const graphql = await import('graphql');
const { buildSchema, parse } = graphql;

type Schema = OperationInput['schema'];

function cost(
  schema: Schema,
  query: string,
  variables?: Record<string, unknown>,
  options?: CostOptions,
): number {
  return requestedCost(graphql, { schema, document: parse(query), variables }, options);
}

const LINK = `
  directive @link(url: String, as: String, import: [link__Import]) repeatable on SCHEMA
  scalar link__Import
`;
const listSizeArgs =
  '(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION';
const costArgs =
  '(weight: String!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR';

/** The shapes of Apollo Router's own list-size test schema, written with `names` for the directives. */
function routerSchema(header: string, names = { cost: 'cost', listSize: 'listSize' }): Schema {
  const { cost: c, listSize: l } = names;
  return buildSchema(`${LINK}
    ${header}
    directive @${c}${costArgs}
    directive @${l}${listSizeArgs}
    type A { id: ID }
    enum AorB @${c}(weight: "15") { A B }
    scalar ExpensiveInt @${c}(weight: "30")
    type ExpensiveObject @${c}(weight: "40") { id: ID }
    input InputTypeWithCost { somethingWithCost: Int @${c}(weight: "20") }
    input PaginationInput { first: Int after: String }
    input DefaultedPagination { first: Int = 30 }
    input SearchInput { pagination: PaginationInput query: String }
    input DefaultedSearch { pagination: DefaultedPagination = {} }
    input Level2 { count: Int }
    input Level1 { level2: Level2 }
    input DeepInput { level1: Level1 }
    type SizedField { items: [A] }
    type ResultContainer { page: [A] metadata: String }
    type DeepContainer { page: [A] results: ResultContainer total: Int metadata: String }
    type Query {
      fieldWithCost: Int @${c}(weight: "5")
      argWithCost(arg: Int @${c}(weight: "10")): Int
      enumWithCost: AorB
      inputWithCost(someInput: InputTypeWithCost): Int
      scalarWithCost: ExpensiveInt
      objectWithCost: ExpensiveObject
      fieldWithListSize: [String!] @${l}(assumedSize: 2000, requireOneSlicingArgument: false)
      fieldWithDynamicListSize(first: Int = 10): SizedField
        @${l}(slicingArguments: ["first"], sizedFields: ["items"])
      itemsByIds(ids: [ID!]!): [A] @${l}(slicingArguments: ["ids"])
      itemsByIdsWithAssumedSize(ids: [ID!]): [A]
        @${l}(slicingArguments: ["ids"], assumedSize: 50, requireOneSlicingArgument: false)
      search(input: SearchInput!): [A] @${l}(slicingArguments: ["input.pagination.first"])
      searchWithAssumedSize(input: SearchInput): [A]
        @${l}(slicingArguments: ["input.pagination.first"], assumedSize: 25, requireOneSlicingArgument: false)
      defaultedSearch(input: DefaultedSearch = {}): [A]
        @${l}(slicingArguments: ["input.pagination.first"])
      deeplyNested(input: DeepInput!): [A] @${l}(slicingArguments: ["input.level1.level2.count"])
      containerWithNestedList(first: Int): ResultContainer!
        @${l}(slicingArguments: ["first"], sizedFields: ["page"], requireOneSlicingArgument: false)
      deep(first: Int = 10): DeepContainer!
        @${l}(slicingArguments: ["first"], sizedFields: ["results { page }"], requireOneSlicingArgument: false)
      mixed(first: Int = 10): DeepContainer!
        @${l}(slicingArguments: ["first"], sizedFields: ["page", "results { page }"], requireOneSlicingArgument: false)
    }
  `);
}

const router = routerSchema('');

describe("Apollo Router's list-size rules", () => {
  it('slicing arguments by dot path into an input object: search(input: {pagination: {first: 1000}}) is 1002 (was 12)', () => {
    // 1000 × A 1 + SearchInput 1 + PaginationInput 1 = 1002, the router's number
    const query = '{ search(input: { pagination: { first: 1000 } }) { id } }';
    expect(cost(router, query)).toBe(1002);
  });

  it('dot paths read variables, whole or in part', () => {
    const whole = 'query Q($input: SearchInput!) { search(input: $input) { id } }';
    expect(cost(router, whole, { input: { pagination: { first: 1000 } } })).toBe(1002);
    const part = 'query Q($n: Int) { search(input: { pagination: { first: $n } }) { id } }';
    expect(cost(router, part, { n: 400 })).toBe(402); // 400 + 2 input objects
  });

  it('dot paths three levels deep: input.level1.level2.count', () => {
    // 50 × A 1 + DeepInput 1 + Level1 1 + Level2 1 = 53
    const query = '{ deeplyNested(input: { level1: { level2: { count: 50 } } }) { id } }';
    expect(cost(router, query)).toBe(53);
  });

  it('dot paths fall back to assumedSize, then to input field defaults', () => {
    // no input: assumedSize 25 × A 1 = 25
    expect(cost(router, '{ searchWithAssumedSize { id } }')).toBe(25);
    // the argument's default {} and the input field's default first: 30: 30 × A 1 = 30
    expect(cost(router, '{ defaultedSearch { id } }')).toBe(30);
  });

  it("a list argument's length is the size: itemsByIds with 1,000 ids is 1000 (was 10)", () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `"${i}"`).join(', ');
    expect(cost(router, `{ itemsByIds(ids: [${ids}]) { id } }`)).toBe(1000); // 1000 × A 1
    const query = 'query Q($ids: [ID!]!) { itemsByIds(ids: $ids) { id } }';
    expect(cost(router, query, { ids: ['a', 'b', 'c'] })).toBe(3);
    // no ids: assumedSize 50
    expect(cost(router, '{ itemsByIdsWithAssumedSize { id } }')).toBe(50);
  });

  it('nested sizedFields: deep(first: 7) { results { page { id } } } is 9 (was 102)', () => {
    // DeepContainer 1 + results 1 + 7 pages × A 1 = 9, the router's number
    expect(cost(router, '{ deep(first: 7) { results { page { id } } } }')).toBe(9);
    // first 1000: 1 + 1 + 1000 = 1002 (was 12); the default first 10: 12
    expect(cost(router, '{ deep(first: 1000) { results { page { id } } } }')).toBe(1002);
    expect(cost(router, '{ deep { results { page { id } } } }')).toBe(12);
    // the container's own page is not on the path: defaultListSize 10
    expect(cost(router, '{ deep(first: 1000) { page { id } } }')).toBe(11);
  });

  it('sizedFields at one level and nested, through fragments', () => {
    // 1 + 3 pages + (results 1 + 3 pages) = 8
    const query = `{ mixed(first: 3) { ...P results { ...R } } }
      fragment P on DeepContainer { page { id } }
      fragment R on ResultContainer { page { id } }`;
    expect(cost(router, query)).toBe(8);
    // ResultContainer 1 + 5 pages = 6
    expect(cost(router, '{ containerWithNestedList(first: 5) { page { id } metadata } }')).toBe(6);
  });

  it("the router's custom cost query: 127 there, 128 here (a root field costs at least 1)", () => {
    const query = `fragment Items on SizedField { items { id } }
      { fieldWithCost argWithCost(arg: 3) enumWithCost
        inputWithCost(someInput: { somethingWithCost: 10 })
        scalarWithCost objectWithCost fieldWithListSize
        fieldWithDynamicListSize(first: 5) { ...Items } }`;
    // 5 + 10 (argument) + 15 (enum) + 21 (input 1 + field 20) + 30 + 40 + 6 (SizedField 1 + 5
    // items) = 127, and fieldWithListSize (2,000 free strings: 0) at least 1 here: 128
    expect(cost(router, query)).toBe(128);
    // without first, its default 10: 1 + 10 items, 133 (the router: 132)
    expect(cost(router, query.replace('(first: 5)', ''))).toBe(133);
  });

  it('@link import renames: @renamedCost and @renamedListSize are read (were ignored)', () => {
    const header = `schema @link(url: "https://specs.apollo.dev/cost/v0.1",
        import: [{ name: "@cost", as: "@renamedCost" }, { name: "@listSize", as: "@renamedListSize" }]) { query: Query }`;
    const renamed = routerSchema(header, { cost: 'renamedCost', listSize: 'renamedListSize' });
    expect(cost(renamed, '{ fieldWithCost }')).toBe(5);
    expect(cost(renamed, '{ objectWithCost { id } }')).toBe(40);
    expect(cost(renamed, '{ deep(first: 7) { results { page { id } } } }')).toBe(9);
    // unrenamed, the same SDL's directives are unknown names: defaults (1, and 1 + 1 + 10)
    const plain = routerSchema('', { cost: 'renamedCost', listSize: 'renamedListSize' });
    expect(cost(plain, '{ fieldWithCost }')).toBe(1);
  });

  it('@link namespaces: as: "x" makes @x the cost and @x__listSize the list size', () => {
    const header = `extend schema @link(url: "https://specs.apollo.dev/cost/v0.1", as: "x")`;
    const spaced = routerSchema(header, { cost: 'x', listSize: 'x__listSize' });
    expect(cost(spaced, '{ fieldWithCost }')).toBe(5);
    expect(cost(spaced, '{ fieldWithDynamicListSize(first: 4) { items { id } } }')).toBe(5);
  });
});

describe('page objects: a slicing argument sizes the lists the returned object holds', () => {
  const pages = buildSchema(`
    type Author { name: String }
    type Post { id: ID author: Author }
    type PostPage { total: Int items: [Post!]! tags: [String!]! }
    type Query { posts(limit: Int): PostPage! }
  `);

  it('posts(limit: 5000) { total items { id author { name } } } is 10001 (was 21)', () => {
    // PostPage 1 + 5000 items × (Post 1 + Author 1) = 10001
    const query = '{ posts(limit: 5000) { total items { id author { name } } } }';
    expect(cost(pages, query)).toBe(10001);
  });

  it('the actual cost counts the items returned, beyond any assumed size', () => {
    const query = '{ posts(limit: 5000) { total items { id author { name } } } }';
    const items = Array.from({ length: 5000 }, (_, id) => ({ id, author: { name: 'a' } }));
    const data = { posts: { total: 5000, items } };
    expect(actualCost(graphql, { schema: pages, document: parse(query), data })).toBe(10001);
  });
});

describe('page objects: the slice reaches lists through singular object fields', () => {
  // The reviewer's schema: Page holds a list directly (items) and one singular object below (data).
  const probe = buildSchema(`
    type Post { id: ID author: String }
    type Inner { items: [Post] }
    type Page { total: Int data: Inner items: [Post] }
    type Query { posts(limit: Int): Page hello: String }
  `);

  it('posts(limit: 5000) { data { items { id author } } } is 5002 (was 12)', () => {
    // Page 1 + Inner 1 + 5000 items × Post 1 = 5002
    expect(cost(probe, '{ posts(limit: 5000) { data { items { id author } } } }')).toBe(5002);
    // Page 1 + 5000 × Post 1 = 5001, as before
    expect(cost(probe, '{ posts(limit: 5000) { items { id } } }')).toBe(5001);
    // Page 1 + (Inner 1 + 5000) + 5000 = 10002; through a fragment, a variable: the same
    expect(
      cost(
        probe,
        'query Q($n: Int) { posts(limit: $n) { ...P items { id } } } fragment P on Page { data { items { id } } }',
        { n: 5000 },
      ),
    ).toBe(10002);
  });

  const deep = buildSchema(`
    type Tag { name: String }
    type Post { id: ID tags: [Tag] }
    type Inner { items: [Post] }
    type Page { next: Page data: Inner items: [Post] }
    type Query { posts(limit: Int): Page }
  `);

  it('only the first list on each path takes the size: lists below it keep theirs', () => {
    // Page 1 + Inner 1 + 50 × (Post 1 + 10 default tags × Tag 1) = 552
    expect(cost(deep, '{ posts(limit: 50) { data { items { tags { name } } } } }')).toBe(552);
  });

  it('a cycle of singular fields (Page.next: Page) sizes the list at any depth, and terminates', () => {
    // 3 × Page 1 + 50 × Post 1 = 53
    expect(cost(deep, '{ posts(limit: 50) { next { next { items { id } } } } }')).toBe(53);
  });

  it('explicit sizedFields still win over the inference', () => {
    const annotated = buildSchema(`
      directive @listSize${listSizeArgs}
      type Post { id: ID }
      type Inner { items: [Post] }
      type Page { data: Inner items: [Post] }
      type Query { posts(limit: Int): Page @listSize(slicingArguments: ["limit"], sizedFields: ["items"]) }
    `);
    // Page 1 + Inner 1 + 10 default items × Post 1 = 12: only `items` is named
    expect(cost(annotated, '{ posts(limit: 5000) { data { items { id } } } }')).toBe(12);
    // Page 1 + 5000 × Post 1 = 5001
    expect(cost(annotated, '{ posts(limit: 5000) { items { id } } }')).toBe(5001);
  });
});

describe('page objects: each possible type of a union or interface is sized along its own fields', () => {
  // The reviewer's schema: possible types with a same-named field `data` of different types.
  const abstract = buildSchema(`
    type Entry { id: ID author: String }
    type X { items: [Entry] }
    type Y { entries: [Entry] }
    type A { data: X }
    type B { data: Y }
    union Page = A | B
    type C { data: [Entry] }
    type D { data: Y }
    union Page2 = C | D
    interface I { total: Int }
    type E implements I { total: Int data: X }
    type F implements I { total: Int data: Y }
    type Query {
      posts(limit: Int): Page
      posts2(limit: Int): Page2
      posts3(limit: Int): I
      ctrl(limit: Int): B
    }
  `);

  it('union A | B with A.data: X and B.data: Y: the B path is 100002 (was 12), as on B itself', () => {
    // B 1 + Y 1 + 100000 entries × Entry 1 = 100002; the A branch selects nothing: A 1
    const onB = '{ posts(limit: 100000) { ... on B { data { entries { id } } } } }';
    expect(cost(abstract, onB)).toBe(100002);
    expect(cost(abstract, '{ ctrl(limit: 100000) { data { entries { id } } } }')).toBe(100002);
    // A 1 + X 1 + 100000 items × Entry 1 = 100002, as before
    const onA = '{ posts(limit: 100000) { ... on A { data { items { id } } } } }';
    expect(cost(abstract, onA)).toBe(100002);
  });

  it('union C | D with C.data: [Entry] and D.data: Y: the D path is 100002 (was 12)', () => {
    // D 1 + Y 1 + 100000 entries × Entry 1 = 100002 (the list on C no longer hides D's path)
    const onD = '{ posts2(limit: 100000) { ... on D { data { entries { id } } } } }';
    expect(cost(abstract, onD)).toBe(100002);
    // C 1 + 100000 × Entry 1 = 100001: C's own list still takes the size
    expect(cost(abstract, '{ posts2(limit: 100000) { ... on C { data { id } } } }')).toBe(100001);
  });

  it('interface I with E.data: X and F.data: Y: the F path is 100002 (was 12)', () => {
    // F 1 + Y 1 + 100000 entries × Entry 1 = 100002; E selects nothing: 1
    const onF = '{ posts3(limit: 100000) { ... on F { data { entries { id } } } } }';
    expect(cost(abstract, onF)).toBe(100002);
    // E 1 + X 1 + 100000 items × Entry 1 = 100002
    const onE = '{ posts3(limit: 100000) { total ... on E { data { items { id } } } } }';
    expect(cost(abstract, onE)).toBe(100002);
  });

  it('both branches in one selection: the heavier possible type is the price', () => {
    // A: 1 + 1 + 300 = 302; B: 1 + 1 + 300 × (Entry 1) = 302; one value is one of them: 302
    const both =
      '{ posts(limit: 300) { ... on A { data { items { id } } } ... on B { data { entries { id } } } } }';
    expect(cost(abstract, both)).toBe(302);
  });

  it('a cycle through a union (Node.next: Chain, Chain = Node | Leaf) sizes the list at any depth, and terminates', () => {
    const cyclic = buildSchema(`
      type Entry { id: ID }
      type Leaf { id: ID }
      type Node { next: Chain items: [Entry] }
      union Chain = Node | Leaf
      type Query { chain(first: Int): Chain }
    `);
    // three Nodes 1 each + 40 entries × Entry 1 = 43 (a Leaf at any level would be 1)
    const query =
      '{ chain(first: 40) { ... on Node { next { ... on Node { next { ... on Node { items { id } } } } } } } }';
    expect(cost(cyclic, query)).toBe(43);
  });

  it('aliases with different sizes over a fragment on the union: each possible type walked once', () => {
    const aliases = Array.from(
      { length: 1000 },
      (_, i) => `p${i}: posts(limit: ${i + 1}) { ...P }`,
    );
    const query = `{ ${aliases.join(' ')} }
      fragment P on Page { ... on A { data { items { id } } } ... on B { data { entries { id } } } }`;
    const input = { schema: abstract, document: parse(query) };
    // alias i: max(A, B) = 1 + 1 + (i + 1) = i + 3; Σ over i < 1000 = 499,500 + 3,000
    // Steps: per alias the field and its spread on A and on B (3); the fragment once per
    // possible type: two inline fragments + data + the list + id = 5, twice: 3000 + 10 = 3010
    expect(requestedCost(graphql, input, { maxAnalysisSteps: 3010 })).toBe(502_500);
    expect(() => requestedCost(graphql, input, { maxAnalysisSteps: 3009 })).toThrow(
      CostAnalysisLimitError,
    );
  });
});

describe('variables the server does not tell (Mercurius subscriptions)', () => {
  const schema = buildSchema(`
    type Post { id: ID }
    type Page { items: [Post] }
    type Query { posts(limit: Int): Page }
  `);
  const input = (query: string) => ({ schema, document: parse(query), variablesUnknown: true });

  it('a variable slicing argument without a default counts at the largest Int', () => {
    // Page 1 + 2147483647 × Post 1 = 2147483648
    const query = 'query ($n: Int) { posts(limit: $n) { items { id } } }';
    expect(requestedCost(graphql, input(query))).toBe(UNKNOWN_SLICE_SIZE + 1);
    // told the variables are all the client sent, an unset one is unset: the default 10
    expect(cost(schema, query)).toBe(11);
  });

  it("a variable's default counts as unknown too: the client may have sent any value; a literal is read", () => {
    // The client sent { n: 5000000 } beside ($n: Int = 30): 30 said nothing of what ran.
    // Page 1 + 2147483647 × Post 1 = 2147483648 (was 31, priced at the default)
    const defaulted = 'query ($n: Int = 30) { posts(limit: $n) { items { id } } }';
    expect(requestedCost(graphql, input(defaulted))).toBe(UNKNOWN_SLICE_SIZE + 1);
    // Page 1 + 7 × Post 1 = 8
    expect(requestedCost(graphql, input('{ posts(limit: 7) { items { id } } }'))).toBe(8);
    // told the variables, the default is read when none was sent: Page 1 + 30 × Post 1 = 31
    expect(cost(schema, defaulted)).toBe(31);
  });
});

describe('flat prices for unbounded work are gone', () => {
  const flat = buildSchema(`
    type Query { hello: String }
    type Mutation { sendEmail(to: String): Boolean }
  `);

  it('1,000 aliases of a root scalar cost 1,000 (were 1)', () => {
    const query = `{ ${Array.from({ length: 1000 }, (_, i) => `a${i}: hello`).join(' ')} }`;
    expect(cost(flat, query)).toBe(1000);
  });

  it('1,000 aliased sendEmail mutations cost 11,000: 10 + 1 each (were 10)', () => {
    const query = `mutation { ${Array.from({ length: 1000 }, (_, i) => `m${i}: sendEmail(to: "x")`).join(' ')} }`;
    expect(cost(flat, query)).toBe(11_000);
    const data = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`m${i}`, true]));
    expect(actualCost(graphql, { schema: flat, document: parse(query), data })).toBe(11_000);
  });

  it('a mutation field left out by @skip or @include costs nothing', () => {
    const query = `mutation M($no: Boolean = false) {
      a: sendEmail b: sendEmail @skip(if: true) c: sendEmail @include(if: $no) }`;
    expect(cost(flat, query)).toBe(11); // a alone: 10 + 1
    expect(cost(flat, query, { no: true })).toBe(22);
  });
});

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (caught) {
    return caught;
  }
  return undefined;
}

function field(name: string, selectionSet?: SelectionSetNode): FieldNode {
  return {
    kind: graphql.Kind.FIELD,
    name: { kind: graphql.Kind.NAME, value: name },
    ...(selectionSet && { selectionSet }),
  };
}

describe('the walks are linear in the document: counted in steps, not in CPU', () => {
  const schema = buildSchema(SDL);

  it('the 9-level F-chain (each fragment spread ten times) takes 82 steps, not 10^8 walks', () => {
    const { query, data } = fragmentChain(9);
    // graphql-js expands a fragment once per selection set: one __typename, free; the minimum 1.
    // Steps: the root's spread, then 8 fragments × 10 spreads, then __typename: 1 + 80 + 1 = 82
    const input = { schema, document: parse(query) };
    expect(requestedCost(graphql, input, { maxAnalysisSteps: 82 })).toBe(1);
    expect(() => requestedCost(graphql, input, { maxAnalysisSteps: 81 })).toThrow(
      CostAnalysisLimitError,
    );
    expect(actualCost(graphql, { ...input, data }, { maxAnalysisSteps: 82 })).toBe(1);
  });

  it('S aliases × M fragments with S different sizes: S + M steps, not S × M', () => {
    const { query } = aliasesTimesFragments(2000, 300);
    const input = { schema, document: parse(query) };
    // per alias: the root field and its spread (2 steps); the chain once: 300 × (total and
    // the next spread), the last without one: 4000 + 599 = 4599 (S × M would be 600,000)
    expect(requestedCost(graphql, input, { maxAnalysisSteps: 4599 })).toBe(2000); // 2000 × Conn 1
    expect(() => requestedCost(graphql, input, { maxAnalysisSteps: 4598 })).toThrow(
      CostAnalysisLimitError,
    );
  });

  it('the same chain below a sized field: walked once for every size', () => {
    const { query } = aliasesTimesFragments(500, 300, true);
    const input = { schema, document: parse(query) };
    // alias i: Conn 1 + (i + 1) edges × Item 1 = i + 2; Σ over i < 500 = 124,750 + 1,000
    expect(requestedCost(graphql, input, { maxAnalysisSteps: 5000 })).toBe(125_750);
  });

  it('a fragment spread twice in one selection set counts once, as graphql-js runs it once', () => {
    const query =
      '{ node { ...F ...F ... on Item { ...F } } } fragment F on Item { author { id } }';
    expect(cost(schema, query)).toBe(2); // Item 1 + Author 1
  });
});

describe('the analysis refuses what it cannot bound', () => {
  const schema = buildSchema('type Node { id: ID next: Node } type Query { node: Node }');

  it('throws CostAnalysisLimitError (maxAnalysisSteps) past the step budget', () => {
    const query = `{ ${Array.from({ length: 50 }, (_, i) => `n${i}: node { id }`).join(' ')} }`;
    expect(cost(schema, query)).toBe(50); // 50 × Node 1
    // 50 root selections + 50 `id`: 100 steps
    expect(cost(schema, query, {}, { maxAnalysisSteps: 100 })).toBe(50);
    const run = () => cost(schema, query, {}, { maxAnalysisSteps: 99 });
    expect(run).toThrow(CostAnalysisLimitError);
    expect(thrown(run)).toEqual(
      new CostAnalysisLimitError({ limit: 'maxAnalysisSteps', measured: 100, maximum: 99 }),
    );
    expect((thrown(run) as CostAnalysisLimitError).exceeded).toEqual({
      limit: 'maxAnalysisSteps',
      measured: 100,
      maximum: 99,
    });
    const data = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`n${i}`, { id: 1 }]));
    const actual = () =>
      actualCost(graphql, { schema, document: parse(query), data }, { maxAnalysisSteps: 99 });
    expect(actual).toThrow(CostAnalysisLimitError);
  });

  it('throws CostAnalysisLimitError (maxDepth), not a stack overflow, on a 2,000-level selection', () => {
    // built without the parser, whose own recursion is the limit in Jest's smaller stack
    const { Kind } = graphql;
    let set: SelectionSetNode = { kind: Kind.SELECTION_SET, selections: [field('id')] };
    for (let level = 2000; level >= 1; level--) {
      set = { kind: Kind.SELECTION_SET, selections: [field(level === 1 ? 'node' : 'next', set)] };
    }
    const document: DocumentNode = {
      kind: Kind.DOCUMENT,
      definitions: [
        {
          kind: Kind.OPERATION_DEFINITION,
          operation: graphql.OperationTypeNode.QUERY,
          selectionSet: set,
        },
      ],
    };
    const error = thrown(() => requestedCost(graphql, { schema, document }));
    expect(error).toBeInstanceOf(CostAnalysisLimitError);
    expect((error as CostAnalysisLimitError).exceeded).toEqual({
      limit: 'maxDepth',
      measured: MAX_WALK_DEPTH + 1,
      maximum: MAX_WALK_DEPTH,
    });
    let data: Record<string, unknown> = { id: 1 };
    for (let level = 2000; level >= 2; level--) data = { next: data };
    expect(() => actualCost(graphql, { schema, document, data: { node: data } })).toThrow(
      CostAnalysisLimitError,
    );
  });

  it('throws OperationNotFoundError for an unknown operationName', () => {
    const run = () =>
      requestedCost(graphql, {
        schema,
        document: parse('query A { node { id } }'),
        operationName: 'B',
      });
    expect(run).toThrow(OperationNotFoundError);
    expect(run).not.toThrow(CostAnalysisLimitError);
  });
});
