import { HttpException, type ExecutionContext } from '@nestjs/common';
import { ProblemDetailsFilter, RateLimitProblemException } from '../transports/problem-details.js';
import { markDecidedFor } from './outcome.js';

/**
 * `@ConcurrencyLimit(n, { includeUpload: true })`: the route's call is
 * decided as its request arrives, before its body is read, so that a slow upload holds its
 * slot too. The module's guard runs then, on a context built like Nest's, and stores its
 * outcome on the request: when Nest's own guard meets the call later, it finds it decided
 * (a call guarded twice counts once). A refusal is written at once, the body left unread.
 * The hooks that call this are installed by `module/before-body-setup.ts`.
 */

/** A guard as far as deciding a call goes: `RateLimitGuard`, or the app's subclass. */
export interface Decider {
  canActivate(ctx: ExecutionContext): Promise<boolean>;
}

/** The context Nest builds for an HTTP call of `handler`, with `[request, response]`. */
function arrivalContext(
  type: object,
  handler: object,
  request: object,
  response: object,
): ExecutionContext {
  const args = [request, response, undefined];
  const http = {
    getRequest: () => request,
    getResponse: () => response,
    getNext: () => undefined,
  };
  const none = () => {
    throw new TypeError('an HTTP call, before its body: only switchToHttp() applies');
  };
  return {
    getClass: () => type,
    getHandler: () => handler,
    getArgs: () => args,
    getArgByIndex: (index: number) => args[index],
    getType: () => 'http',
    switchToHttp: () => http,
    switchToRpc: none,
    switchToWs: none,
  } as unknown as ExecutionContext;
}

/**
 * Decides the call of `handler` on `type` before its body is read.
 * @returns true to read the body and go on; false when the refusal has been written
 */
export function decideOnArrival(
  guard: Decider,
  type: object,
  handler: object,
  request: object,
  response: object,
): Promise<boolean> {
  const ctx = arrivalContext(type, handler, request, response);
  // Found by routing the request once more, which may not pick the route Nest dispatches to
  // (versions, hosts): the guard decides afresh for any other (see RateLimitGuard).
  markDecidedFor(request, type, handler);
  let decided: Promise<boolean>;
  try {
    decided = guard.canActivate(ctx);
  } catch (error) {
    return Promise.resolve(refused(ctx, error));
  }
  return decided.then(
    () => true,
    (error: unknown) => refused(ctx, error),
  );
}

/** What Nest's exception layer would write for a refusal; anything else goes on to Nest. */
function refused(ctx: ExecutionContext, error: unknown): boolean {
  if (error instanceof RateLimitProblemException) {
    new ProblemDetailsFilter().catch(error, ctx);
    return false;
  }
  // Nest's guard meets anything else again (the outcome is stored) and answers as it would.
  if (!(error instanceof HttpException)) return true;
  const status = error.getStatus();
  const given = error.getResponse();
  const body = JSON.stringify(
    typeof given === 'string' ? { statusCode: status, message: given } : given,
  );
  const response = ctx.getArgByIndex<Sink>(1);
  if (response.raw !== undefined && typeof response.code === 'function') {
    response.code(status).header!('Content-Type', JSON_TYPE).send!(body);
  } else {
    response.statusCode = status;
    response.setHeader?.('Content-Type', JSON_TYPE);
    response.end?.(body);
  }
  return false;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** An Express (Node) response or a Fastify reply, as far as writing a refusal goes. */
type Sink = {
  statusCode?: number;
  setHeader?: (name: string, value: string) => void;
  end?: (body: string) => void;
  raw?: unknown;
  code?: (status: number) => Sink;
  header?: (name: string, value: string) => Sink;
  send?: (body: string) => unknown;
};
