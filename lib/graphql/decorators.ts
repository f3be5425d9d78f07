/**
 * Code-first twins of the IBM cost directives for @nestjs/graphql: `@Cost(weight)` and
 * `@ListSize({...})` write `extensions.cost` and `extensions.listSize` (weights.ts) through
 * `@Extensions`, where the cost analysis reads them. The only file of lib/graphql that
 * imports Nest; exported from `nest-rate-limit/graphql` alone.
 *
 * Where they reach the schema (@nestjs/graphql 12 to 14):
 * - `@Field()` of an `@ObjectType` or `@InputType` class, a `@Query`/`@Mutation`/
 *   `@Subscription` handler, a `@ResolveField` that no `@Field` of the model declares, and
 *   an `@ObjectType` class (its type weight): yes.
 * - a `@ResolveField` method of a field the model also declares with `@Field`: no, Nest keeps
 *   the model's extensions. Put the decorator on the model's `@Field` instead.
 * - an argument (`@Args`, or a field of an `@ArgsType` class) and an enum: no, Nest gives them
 *   no extensions. Use `@Directive('@cost(weight: "5")')` on the `@ArgsType` field (Nest
 *   copies its directives onto the argument), or declare the argument as an `@InputType`
 *   whose fields carry `@Cost`.
 */
import { Extensions } from '@nestjs/graphql';
import { RateLimitConfigError } from '../core/errors.js';
import {
  COST_EXTENSION,
  LIST_SIZE_EXTENSION,
  type CostExtension,
  type ListSizeExtension,
} from './weights.js';

/** What `@Extensions` returns: usable on a class, a method or a property. */
export type CostDecorator = MethodDecorator & ClassDecorator & PropertyDecorator;

/**
 * `@cost(weight:)` for code-first: the cost points one value of this field or type adds
 * (default 1 for objects, 0 for scalars and enums), or a field of an `@InputType` adds when
 * set. A finite number, may be fractional or negative (a field never totals below 0).
 */
export function Cost(weight: number): CostDecorator {
  if (typeof weight !== 'number' || !Number.isFinite(weight)) {
    throw new RateLimitConfigError(
      'ERR_RATE_LIMIT_COST',
      `@Cost(weight) needs a finite number, got ${String(weight)}`,
    );
  }
  const value: CostExtension = { weight };
  return Extensions({ [COST_EXTENSION]: value });
}

/**
 * `@listSize(...)` for code-first, on a field or handler that returns a list (or a
 * connection, with `sizedFields`). `assumedSize`: a non-negative integer, the most items
 * returned when no slicing argument is given; `slicingArguments`: names of Int arguments that
 * bound the list (`['first', 'last']`), dot paths into input objects (`['input.pagination.first']`)
 * or list arguments whose length is the size (`['ids']`); `sizedFields`: the returned type's
 * fields whose lists take that size (`['edges', 'nodes']`), or paths to them in selection
 * syntax (`['results { page }']`); `requireOneSlicingArgument`: default `true`.
 */
export function ListSize(options: ListSizeExtension): CostDecorator {
  const { assumedSize, slicingArguments, sizedFields } = options ?? {};
  const bad = (detail: string): never => {
    throw new RateLimitConfigError('ERR_RATE_LIMIT_COST', `@ListSize: ${detail}`);
  };
  if (assumedSize !== undefined && !(Number.isInteger(assumedSize) && assumedSize >= 0)) {
    bad(`assumedSize must be a non-negative integer, got ${String(assumedSize)}`);
  }
  for (const [name, list] of [
    ['slicingArguments', slicingArguments],
    ['sizedFields', sizedFields],
  ] as const) {
    if (list !== undefined && !(Array.isArray(list) && list.every(isName))) {
      bad(`${name} must be an array of field or argument names`);
    }
  }
  const value: ListSizeExtension = {
    ...(assumedSize !== undefined && { assumedSize }),
    ...(slicingArguments && { slicingArguments: [...slicingArguments] }),
    ...(sizedFields && { sizedFields: [...sizedFields] }),
    requireOneSlicingArgument: options.requireOneSlicingArgument !== false,
  };
  return Extensions({ [LIST_SIZE_EXTENSION]: value });
}

function isName(value: unknown): boolean {
  return typeof value === 'string' && value.length > 0;
}
