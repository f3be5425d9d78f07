/**
 * The code-first twins of the cost directives (issue 25): a schema built by @nestjs/graphql
 * with `@Cost` and `@ListSize` costs every query exactly as the same schema written in SDL
 * with `@cost` and `@listSize`. Also pins where Nest carries them and where it does not.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  Args,
  ArgsType,
  Directive,
  Field,
  GraphQLSchemaBuilderModule,
  GraphQLSchemaFactory,
  ID,
  InputType,
  Int,
  Mutation,
  ObjectType,
  Parent,
  Query,
  ResolveField,
  Resolver,
} from '@nestjs/graphql';
import type { GraphQLObjectType, GraphQLSchema } from 'graphql';
import { Cost, ListSize } from '../../lib/graphql/decorators.js';
import { requestedCost } from '../../lib/graphql/index.js';

const graphql = await import('graphql');

@ObjectType()
@Cost(5)
class Address {
  @Field(() => Int)
  zipCode!: number;
}

@ObjectType()
class Author {
  @Field({ nullable: true })
  name?: string;
}

@ObjectType()
class Publisher {
  @Field({ nullable: true })
  name?: string;
  @Field(() => Address, { nullable: true })
  address?: Address;
}

@ObjectType()
class Book {
  @Field({ nullable: true })
  title?: string;
  @Field(() => Author, { nullable: true })
  @Cost(2)
  author?: Author;
  @Field(() => Publisher, { nullable: true })
  publisher?: Publisher;
  @Field(() => Int, { nullable: true })
  pages?: number;
}

@InputType()
class BookFilter {
  @Field({ nullable: true })
  @Cost(3)
  genre?: string;
}

@ObjectType()
class ShelfResults {
  @Field(() => [Book], { nullable: true })
  page?: Book[];
}

@ObjectType()
class Shelf {
  @Field(() => ShelfResults, { nullable: true })
  results?: ShelfResults;
  @Field(() => Int, { nullable: true })
  total?: number;
}

@InputType()
class Paging {
  @Field(() => Int, { nullable: true })
  first?: number;
}

@ArgsType()
class SearchArgs {
  @Field()
  @Directive('@cost(weight: 6)')
  term!: string;
}

@Resolver(() => Book)
class BookResolver {
  @Query(() => Book, { nullable: true })
  book(@Args('id', { type: () => ID, nullable: true }) _id?: string): Book | null {
    return null;
  }

  @Query(() => [Book], { nullable: 'itemsAndList' })
  @ListSize({ assumedSize: 5 })
  bestsellers(): Book[] {
    return [];
  }

  @Query(() => [Book])
  @ListSize({ slicingArguments: ['limit'], requireOneSlicingArgument: true })
  newestAdditions(
    @Args('limit', { type: () => Int }) _limit: number,
    @Args('filter', { type: () => BookFilter, nullable: true }) _filter?: BookFilter,
  ): Book[] {
    return [];
  }

  /** A dot path into an input, and a nested sized field. */
  @Query(() => Shelf, { nullable: true })
  @ListSize({ slicingArguments: ['paging.first'], sizedFields: ['results { page }'] })
  shelf(@Args('paging', { type: () => Paging, nullable: true }) _paging?: Paging): Shelf | null {
    return null;
  }

  @Query(() => [Book])
  search(@Args() _args: SearchArgs): Book[] {
    return [];
  }

  @Mutation(() => Book)
  @Cost(7)
  addBook(): Book {
    return {};
  }

  /** A field only the resolver declares: its `@Cost` reaches the schema. */
  @ResolveField(() => Int)
  @Cost(4)
  rating(@Parent() _book: Book): number {
    return 0;
  }

  /** A field the model declares too: Nest keeps the model's extensions, not these. */
  @ResolveField(() => Int, { nullable: true })
  @Cost(100)
  pages(@Parent() _book: Book): number {
    return 0;
  }
}

/** The same schema in SDL, weights as the IBM directives. */
const SDL = `
  directive @cost(weight: Int!) on ARGUMENT_DEFINITION | ENUM | FIELD_DEFINITION | INPUT_FIELD_DEFINITION | OBJECT | SCALAR
  directive @listSize(assumedSize: Int, slicingArguments: [String!], sizedFields: [String!], requireOneSlicingArgument: Boolean = true) on FIELD_DEFINITION
  type Address @cost(weight: 5) { zipCode: Int! }
  type Author { name: String }
  type Publisher { name: String  address: Address }
  type Book {
    title: String
    author: Author @cost(weight: 2)
    publisher: Publisher
    pages: Int
    rating: Int! @cost(weight: 4)
  }
  input BookFilter { genre: String @cost(weight: 3) }
  type ShelfResults { page: [Book!] }
  type Shelf { results: ShelfResults  total: Int }
  input Paging { first: Int }
  type Query {
    shelf(paging: Paging): Shelf @listSize(slicingArguments: ["paging.first"], sizedFields: ["results { page }"])
    book(id: ID): Book
    bestsellers: [Book] @listSize(assumedSize: 5)
    newestAdditions(limit: Int!, filter: BookFilter): [Book!]! @listSize(slicingArguments: ["limit"])
    search(term: String! @cost(weight: 6)): [Book!]!
  }
  type Mutation { addBook: Book! @cost(weight: 7) }
`;

const BOOK = 'title author { name } publisher { name address { zipCode } } rating pages';

/** Queries and their hand-computed costs, the same in both schemas. */
const QUERIES: [string, number][] = [
  // book 1 + author 2 + publisher 1 + address 5 + rating 4 = 13
  [`{ book(id: 1) { ${BOOK} } }`, 13],
  // 5 × 13 = 65
  [`{ bestsellers { ${BOOK} } }`, 65],
  // 3 × 13 = 39, + filter (input object 1 + genre 3) = 43
  [`{ newestAdditions(limit: 3, filter: { genre: "sf" }) { ${BOOK} } }`, 43],
  // 10 (default list size) × (Book 1 + rating 4) + term 6 = 56
  ['{ search(term: "x") { rating } }', 56],
  // Shelf 1 + results 1 + 4 pages × (Book 1 + rating 4) + Paging 1 = 23
  ['{ shelf(paging: { first: 4 }) { results { page { rating } } } }', 23],
  // mutation 10 + addBook 7 (its @cost stands for Book's 1) + author 2 = 19
  ['mutation { addBook { author { name } } }', 19],
];

describe('code-first @Cost and @ListSize', () => {
  let app: INestApplicationContext;
  let codeFirst: GraphQLSchema;
  const schemaFirst = graphql.buildSchema(SDL);

  beforeAll(async () => {
    app = await NestFactory.createApplicationContext(GraphQLSchemaBuilderModule, { logger: false });
    codeFirst = await app.get(GraphQLSchemaFactory).create([BookResolver]);
  });

  afterAll(async () => {
    await app?.close();
  });

  it.each(QUERIES)('%s costs %d in both schemas', (query, expected) => {
    const document = graphql.parse(query);
    expect(requestedCost(graphql, { schema: schemaFirst, document })).toBe(expected);
    expect(requestedCost(graphql, { schema: codeFirst, document })).toBe(expected);
  });

  it('puts the weights in extensions, the shape the analysis reads', () => {
    const address = codeFirst.getType('Address');
    expect(address?.extensions).toEqual({ cost: { weight: 5 } });
    const query = codeFirst.getQueryType()?.getFields();
    expect(query?.['bestsellers']?.extensions).toEqual({
      listSize: { assumedSize: 5, requireOneSlicingArgument: true },
    });
    // a @ResolveField over a model @Field: the model's (empty) extensions win
    const book = codeFirst.getType('Book') as GraphQLObjectType;
    expect(book.getFields()['pages']?.extensions).toEqual({});
  });

  it('refuses a weight or size that cannot work', () => {
    expect(() => Cost(Number.NaN)).toThrow('ERR_RATE_LIMIT_COST');
    expect(() => ListSize({ assumedSize: -1 })).toThrow('ERR_RATE_LIMIT_COST');
    expect(() => ListSize({ slicingArguments: [''] })).toThrow('ERR_RATE_LIMIT_COST');
  });
});
