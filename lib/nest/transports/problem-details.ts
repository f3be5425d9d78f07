import { Catch, HttpException, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { PROBLEM_CONTENT_TYPE, type ProblemDetails } from '../../http/responses.js';

/**
 * An HTTP refusal with `errorFormat: 'problem'`: an `HttpException` whose response is the
 * RFC 9457 body. The module's {@link ProblemDetailsFilter} sends it as
 * `application/problem+json`; an exception filter of yours that catches it first renders it
 * as it likes.
 */
export class RateLimitProblemException extends HttpException {
  constructor(readonly problem: ProblemDetails) {
    super(problem, problem.status);
  }
}

/** The response objects the filter writes to: an Express (Node) response or a Fastify reply. */
type Sink = {
  headersSent?: boolean;
  statusCode?: number;
  setHeader?: (name: string, value: string) => void;
  end?: (body?: string) => void;
  raw?: unknown;
  code?: (status: number) => Sink;
  header?: (name: string, value: string) => Sink;
  send?: (body: Buffer) => unknown;
};

/**
 * Sends a {@link RateLimitProblemException} as `application/problem+json` (exactly: no
 * charset, which JSON has no use for), the headers the guard set kept. The body is written here rather than by Nest's own filter: Nest 11's
 * Express adapter replaces a Content-Type that does not start with `application/json` on
 * error bodies (and Express would append a charset). Registered globally by the module; it
 * catches nothing else.
 */
@Catch(RateLimitProblemException)
export class ProblemDetailsFilter implements ExceptionFilter<RateLimitProblemException> {
  catch(exception: RateLimitProblemException, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<Sink>();
    const status = exception.getStatus();
    const body = JSON.stringify(exception.problem);
    if (response.raw !== undefined && typeof response.code === 'function') {
      // A Buffer: Fastify appends a charset to a JSON type given a string.
      response.code(status).header!('Content-Type', PROBLEM_CONTENT_TYPE).send!(Buffer.from(body));
      return;
    }
    if (response.headersSent) {
      response.end?.();
      return;
    }
    response.statusCode = status;
    response.setHeader?.('Content-Type', PROBLEM_CONTENT_TYPE);
    response.end?.(body);
  }
}
