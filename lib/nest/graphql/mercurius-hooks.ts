import { Inject, Injectable, Optional, type OnApplicationBootstrap } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { markCharged } from './charged.js';
import { OPERATION_COSTS } from './tokens.js';
import {
  isRefusal,
  type Charge,
  type OperationCosts,
  type OperationRefusal,
  type OperationRequest,
} from './operation-costs.js';

type Obj = Record<string, unknown>;

/** The parts of Mercurius (`fastify.graphql`) these hooks use. */
interface Mercurius {
  addHook(
    name: 'preExecution',
    hook: (
      schema: OperationRequest['schema'],
      document: OperationRequest['document'],
      context: Obj,
      variables?: Record<string, unknown>,
    ) => Promise<void>,
  ): void;
  addHook(
    name: 'preSubscriptionExecution',
    hook: (
      schema: OperationRequest['schema'],
      document: OperationRequest['document'],
      context: Obj,
    ) => Promise<void>,
  ): void;
  addHook(
    name: 'onResolution',
    hook: (
      execution: { data?: unknown; errors?: unknown[]; extensions?: object },
      context: Obj,
    ) => Promise<void>,
  ): void;
}

function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null;
}

/**
 * The operation name the request gave: Mercurius's `preExecution` hook is not told it. From
 * the body (POST; one element of a batch, `context.operationId`) or the query string (GET).
 */
function operationNameOf(context: Obj): string | undefined {
  const request = isObject(context.reply) ? context.reply.request : undefined;
  if (!isObject(request)) return undefined;
  let body: unknown = request.body ?? request.query;
  if (Array.isArray(body))
    body = body[typeof context.operationId === 'number' ? context.operationId : 0];
  const name = isObject(body) ? body.operationName : undefined;
  return typeof name === 'string' ? name : undefined;
}

/**
 * GraphQL operation cost on Mercurius: `preExecution` checks the operation
 * limits, computes the requested cost and charges the budget before any resolver runs, for
 * HTTP and for queries and mutations over its WebSocket (`fullWsTransport`) alike; a refusal
 * is thrown (Mercurius answers it with its status: 400, 429 or 503); `onResolution` gives back
 * what the operation did not use and adds `extensions.cost`. `preSubscriptionExecution` prices
 * a subscription once, when it starts (a refusal is an `error` message). Installed on the Fastify instance's `graphql` once every
 * module has started (Nest's Mercurius driver registers Mercurius in its `onModuleInit`).
 */
@Injectable()
export class MercuriusOperationCostHooks implements OnApplicationBootstrap {
  constructor(
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
    @Optional() @Inject(OPERATION_COSTS) private readonly costs?: OperationCosts | null,
  ) {}

  onApplicationBootstrap(): void {
    const costs = this.costs;
    const instance: unknown = this.adapterHost.httpAdapter?.getInstance?.();
    const mercurius = isObject(instance) ? instance.graphql : undefined;
    // `fastify.graphql` is Mercurius's query function, carrying `addHook`.
    if (
      !costs ||
      typeof mercurius !== 'function' ||
      typeof (mercurius as unknown as Obj).addHook !== 'function'
    )
      return;
    // Per operation: Mercurius gives each operation of a batch a context of its own.
    const charges = new WeakMap<object, { op: OperationRequest; charge: Charge }>();
    const hooks = mercurius as unknown as Mercurius;
    hooks.addHook('preExecution', async (schema, document, context, variables) => {
      const op: OperationRequest = {
        schema,
        document,
        operationName: operationNameOf(context),
        variables,
        contextValue: context,
      };
      markCharged(context);
      const charged = await costs.charge(op);
      // Mercurius answers with the `statusCode` of the error a hook throws.
      if (isRefusal(charged)) throw mercuriusError(charged);
      // No such operation: graphql-js's execute refuses it, running nothing.
      if (charged !== undefined) charges.set(context, { op, charge: charged });
    });
    // A subscription is priced once, when it starts; its events are not charged. Mercurius
    // neither validates a subscription's document nor tells this hook its variables or name
    // (it passes the schema, document, context and subscription id; the context is the
    // connection's, and the start message's payload is not in it): a variable without a
    // default is priced at the most it could hold.
    hooks.addHook('preSubscriptionExecution', async (schema, document, context) => {
      const invalid = costs.runtime.validate(schema, document);
      if (invalid.length > 0) throw invalid[0];
      const charged = await costs.charge({
        schema,
        document,
        variablesUnknown: true,
        contextValue: context,
      });
      if (isRefusal(charged)) throw mercuriusError(charged);
    });
    hooks.addHook('onResolution', async (execution, context) => {
      const charged = charges.get(context);
      if (charged === undefined) return;
      charges.delete(context);
      const errors = Array.isArray(execution.errors) ? execution.errors : [];
      // Variables that do not coerce (Mercurius checks them before this hook only when some
      // were sent) end the request before any field: no `data` (null once Mercurius has
      // formatted it), and errors without a `path`, which every field error has.
      const ranNothing =
        (execution.data === undefined || execution.data === null) &&
        errors.length > 0 &&
        errors.every((e) => !isObject(e) || e.path === undefined);
      const cost = await costs.settle(charged.op, charged.charge, {
        data: execution.data,
        executed: !ranNothing,
        errors: errors.length > 0,
      });
      if (costs.inResponse) execution.extensions = { ...execution.extensions, cost };
    });
  }
}

/** A refusal as Mercurius answers it: its HTTP status from `statusCode`. */
function mercuriusError(refusal: OperationRefusal): Error {
  return Object.assign(new Error(refusal.message), {
    extensions: refusal.extensions,
    statusCode: refusal.status,
  });
}
