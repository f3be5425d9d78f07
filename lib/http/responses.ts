/** The 429 body (Nest's shape): `retryAfter` in seconds, absent when details are hidden. */
export interface TooManyRequestsBody {
  statusCode: 429;
  error: 'Too Many Requests';
  message: string;
  retryAfter?: number;
}

/** The 503 body when a fail-closed route cannot reach its store, or a call is shed. */
export interface ServiceUnavailableBody {
  statusCode: 503;
  error: 'Service Unavailable';
  message: string;
  /** In **seconds**: 1 for a store outage, `overload.retryAfterSeconds` for a shed call. */
  retryAfter: number;
}

/**
 * The body of a 429. With `exposeDetails: false` (login pages) the wait is left out, so
 * an attacker learns nothing from the body; the `Retry-After` header still says it.
 */
export function tooManyRequestsBody(
  retryAfter: number | undefined,
  options: { message?: string; exposeDetails?: boolean } = {},
): TooManyRequestsBody {
  const expose = options.exposeDetails !== false;
  const message =
    options.message ??
    (retryAfter === undefined
      ? 'This request costs more than the rate limit allows at once; it can never be admitted'
      : expose
        ? `Too many requests; retry in ${retryAfter} s`
        : 'Too many requests');
  return {
    statusCode: 429,
    error: 'Too Many Requests',
    message,
    ...(expose && retryAfter !== undefined && { retryAfter }),
  };
}

/** The body of a 503 (a fail-closed policy whose store is down, a shed call): `retryAfter` in seconds. */
export function serviceUnavailableBody(
  message = 'Rate limiting is unavailable; retry shortly',
  retryAfter = 1,
): ServiceUnavailableBody {
  return { statusCode: 503, error: 'Service Unavailable', message, retryAfter };
}

/** The problem type of a refusal for an exceeded quota (draft-ietf-httpapi-ratelimit-headers). */
const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/** The problem type of a refusal for lack of capacity (draft-ietf-httpapi-ratelimit-headers). */
const TEMPORARY_REDUCED_CAPACITY_TYPE =
  'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';

/** The media type of an RFC 9457 problem details body. */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * An RFC 9457 problem details body with the problem types of
 * draft-ietf-httpapi-ratelimit-headers, sent with `errorFormat: 'problem'`.
 */
export interface ProblemDetails {
  /** The problem type URI: {@link QUOTA_EXCEEDED_TYPE} (429) or {@link TEMPORARY_REDUCED_CAPACITY_TYPE} (503). */
  type: string;
  /** The problem type's summary, the same for every occurrence. */
  title: string;
  /** The HTTP status: 429 or 503. */
  status: 429 | 503;
  /** This occurrence, for a human: the message of the Nest-style body. */
  detail: string;
  /** 429 only: the names of the policies that refused (the draft's extension member). */
  'violated-policies'?: string[];
  /** The wait in **seconds**, as in `Retry-After`; absent when details are hidden or it can never be admitted. */
  retryAfter?: number;
}

/**
 * The problem details of a 429: type `quota-exceeded`, `violated-policies` naming the
 * refusing policies, `detail` the message of {@link tooManyRequestsBody} and `retryAfter`
 * under the same conditions.
 */
export function quotaExceededProblem(
  retryAfter: number | undefined,
  violatedPolicies: string[],
  options: { message?: string; exposeDetails?: boolean } = {},
): ProblemDetails {
  const { message, retryAfter: shown } = tooManyRequestsBody(retryAfter, options);
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: 'Request cannot be satisfied as assigned quota has been exceeded',
    status: 429,
    detail: message,
    'violated-policies': violatedPolicies,
    ...(shown !== undefined && { retryAfter: shown }),
  };
}

/** The problem details of a 503 from a fail-closed policy: type `temporary-reduced-capacity`. */
export function temporaryReducedCapacityProblem(
  message = serviceUnavailableBody().message,
  retryAfter = 1,
): ProblemDetails {
  return {
    type: TEMPORARY_REDUCED_CAPACITY_TYPE,
    title: 'Request cannot be satisfied due to temporary server capacity constraints',
    status: 503,
    detail: message,
    retryAfter,
  };
}
