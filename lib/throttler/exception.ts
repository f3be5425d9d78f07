import { HttpException, HttpStatus } from '@nestjs/common';

/** The refusal's message when no `errorMessage` is set (the throttler's, word for word). */
export const throttlerMessage = 'ThrottlerException: Too Many Requests';

/**
 * The 429 the guard throws: Nest renders it as `{ statusCode: 429, message }`, the
 * throttler's body.
 */
export class ThrottlerException extends HttpException {
  constructor(message?: string) {
    super(`${message || throttlerMessage}`, HttpStatus.TOO_MANY_REQUESTS);
  }
}
