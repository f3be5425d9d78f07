import {
  quotaExceededProblem,
  serviceUnavailableBody,
  temporaryReducedCapacityProblem,
  tooManyRequestsBody,
  type ProblemDetails,
  type ServiceUnavailableBody,
  type TooManyRequestsBody,
} from '../../http/responses.js';

/**
 * A refusal as the pipeline decides it, before any transport renders it: each
 * transport's `refuse` formats it its own way (an HTTP body or RFC 9457 problem, a GraphQL
 * error, a `WsException`, an `RpcException`). Made by {@link refusalOf}.
 */
export interface Refusal {
  /**
   * 429: a policy refused (RFC 6585 §4); 503: a fail-closed policy's store is down, or
   * overload protection shed the call.
   */
  readonly status: 429 | 503;
  /**
   * The wait before a retry can be admitted, in **seconds** (`Retry-After`, RFC 9110
   * §10.2.3; 1 for a 503). Undefined when the request can never be admitted (its cost
   * exceeds a limit).
   */
  readonly retryAfter?: number;
  /** The `errorMessage` option's message; undefined for the default of the status. */
  readonly message?: string;
  /** False (a policy's `exposeDetails: false`) keeps the wait out of every body. */
  readonly exposeDetails: boolean;
  /** Names of the policies that refused; empty for a 503. */
  readonly policies: readonly string[];
  /** `'problem'` (`errorFormat: 'problem'`): HTTP answers with RFC 9457 problem details. */
  readonly format: 'nest' | 'problem';
  /** The Nest-style HTTP body, `{ statusCode, error, message, retryAfter? }` (made when read). */
  readonly body: TooManyRequestsBody | ServiceUnavailableBody;
  /** With `errorFormat: 'problem'`, the RFC 9457 body HTTP sends instead; else undefined. */
  readonly problem?: ProblemDetails;
}

/** The fields a refusal is made of; its bodies are derived from them. */
export type RefusalFields = Omit<Refusal, 'body' | 'problem'>;

/** A {@link Refusal} of `fields`: its bodies are built only if something reads them. */
export function refusalOf(fields: RefusalFields): Refusal {
  return new DecidedRefusal(fields);
}

class DecidedRefusal implements Refusal {
  readonly status: 429 | 503;
  readonly retryAfter?: number;
  readonly message?: string;
  readonly exposeDetails: boolean;
  readonly policies: readonly string[];
  readonly format: 'nest' | 'problem';

  constructor(fields: RefusalFields) {
    this.status = fields.status;
    if (fields.retryAfter !== undefined) this.retryAfter = fields.retryAfter;
    if (fields.message !== undefined) this.message = fields.message;
    this.exposeDetails = fields.exposeDetails;
    this.policies = fields.policies;
    this.format = fields.format;
  }

  get body(): TooManyRequestsBody | ServiceUnavailableBody {
    return refusalBody(this);
  }

  get problem(): ProblemDetails | undefined {
    return this.format === 'problem' ? refusalProblem(this) : undefined;
  }
}

/** The Nest-style body of a refusal: `{ statusCode, error, message, retryAfter? }`. */
export function refusalBody(refusal: RefusalFields): TooManyRequestsBody | ServiceUnavailableBody {
  if (refusal.status === 503) return serviceUnavailableBody(refusal.message, refusal.retryAfter);
  return tooManyRequestsBody(refusal.retryAfter, refusal);
}

/** The RFC 9457 body of a refusal, with draft-ietf-httpapi-ratelimit-headers' problem types. */
export function refusalProblem(refusal: RefusalFields): ProblemDetails {
  if (refusal.status === 503)
    return temporaryReducedCapacityProblem(refusal.message, refusal.retryAfter);
  return quotaExceededProblem(refusal.retryAfter, [...refusal.policies], refusal);
}

/** The fields every non-HTTP transport sends: the body without `statusCode`, with `status`. */
export function refusalFields(refusal: RefusalFields): {
  status: 429 | 503;
  error: 'Too Many Requests' | 'Service Unavailable';
  message: string;
  retryAfter?: number;
} {
  const { statusCode: status, ...rest } = refusalBody(refusal);
  return { status, ...rest };
}
