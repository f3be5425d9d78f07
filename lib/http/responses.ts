/** The 429 body (Nest's shape): `retryAfter` in seconds, absent when details are hidden. */
export interface TooManyRequestsBody {
  statusCode: 429;
  error: 'Too Many Requests';
  message: string;
  retryAfter?: number;
}

/** The 503 body when a fail-closed route cannot reach its store. */
export interface ServiceUnavailableBody {
  statusCode: 503;
  error: 'Service Unavailable';
  message: string;
  retryAfter: 1;
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

export function serviceUnavailableBody(
  message = 'Rate limiting is unavailable; retry shortly',
): ServiceUnavailableBody {
  return { statusCode: 503, error: 'Service Unavailable', message, retryAfter: 1 };
}
