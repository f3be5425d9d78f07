/**
 * The error reference shipped in the package (`docs/reference/errors.md`): one heading per
 * error code, warning code and log event, which every message of ours ends with a link to.
 * There is no public site, so the link is a path inside the installed package.
 */
const ERRORS_PAGE = 'docs/reference/errors.md';

/**
 * The anchor GitHub (and most Markdown renderers) give a heading: lower case, punctuation
 * other than `-` and `_` dropped, spaces as `-`. `ERR_RATE_LIMIT_OPTION` gives
 * `err_rate_limit_option`, `rate_limit.blocked` gives `rate_limitblocked`.
 */
export function errorsAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The page and anchor of `heading`, e.g. `docs/reference/errors.md#err_rate_limit_option`. */
export function errorsLink(heading: string): string {
  return `${ERRORS_PAGE}#${errorsAnchor(heading)}`;
}

/**
 * What a message ends with: `(see docs/reference/errors.md#<anchor> in the nest-rate-limit
 * package)`, so a reader of a log or a stack trace can look the code up.
 */
export function seeErrorsPage(heading: string): string {
  return `(see ${errorsLink(heading)} in the nest-rate-limit package)`;
}
