/** The code of a bad option of `nest-rate-limit/client`, a heading of the error reference. */
export const CLIENT_OPTION_CODE = 'ERR_RATE_LIMIT_CLIENT_OPTION';

// lib/client runs in browsers and imports nothing outside lib/client, so it cannot use the
// core's link builder; the errors-page unit test holds this suffix to the one it builds.
const SEE =
  '(see docs/reference/errors.md#err_rate_limit_client_option in the nest-rate-limit package)';

/**
 * A `RangeError` for a bad client option, with `code` `ERR_RATE_LIMIT_CLIENT_OPTION` (as
 * Node's own `RangeError`s carry one) and a message that ends with the link to its heading.
 */
export function clientOptionError(detail: string): RangeError & { code: string } {
  return Object.assign(
    new RangeError(`rate-limit client: ${detail} [${CLIENT_OPTION_CODE}] ${SEE}`),
    { code: CLIENT_OPTION_CODE },
  );
}
