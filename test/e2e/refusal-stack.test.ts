/**
 * A refusal is an answer, not a bug: the exception a refused HTTP request throws carries no
 * stack trace, whose capture cost more CPU than the rest of the refusal (an HttpException
 * built 20 frames deep: 5.9 µs with its trace, 0.56 µs without), on a path any client can
 * drive at full rate. Everything else of the refusal is as before: 429, `Retry-After`, the
 * body, on Express and Fastify, in both error formats; and the process's own
 * `Error.stackTraceLimit` is left as it was.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  Catch,
  Controller,
  Get,
  HttpException,
  UseFilters,
  type ArgumentsHost,
} from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { RateLimit } from '../../lib/index.js';
import { createApp, PLATFORMS, type AppHandle } from './support/app.js';

const stacks: (string | undefined)[] = [];

/** Records each exception's stack, then answers as Nest would. */
@Catch(HttpException)
class RecordingFilter extends BaseExceptionFilter {
  override catch(exception: HttpException, host: ArgumentsHost): void {
    stacks.push(exception.stack);
    super.catch(exception, host);
  }
}

@Controller()
@UseFilters(RecordingFilter)
class OnceController {
  @Get('once')
  @RateLimit('1/h')
  once() {
    return 'ok';
  }
}

describe.each(PLATFORMS)('a refused request on %s', (platform) => {
  let app: AppHandle | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
    stacks.length = 0;
  });

  it.each(['nest', 'problem'] as const)(
    'throws its %s refusal without a stack trace, and answers it in full',
    async (errorFormat) => {
      app = await createApp(platform, { store: 'memory', errorFormat }, [OnceController]);
      const limit = Error.stackTraceLimit;
      expect((await app.get('/once')).status).toBe(200);
      const refused = await app.get('/once');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('3600');
      expect(JSON.stringify(refused.body)).toContain('3600');
      expect(stacks).toHaveLength(1);
      // Only the first line: the name and the message, no frame.
      expect(stacks[0]).not.toContain('\n');
      expect(Error.stackTraceLimit).toBe(limit);
    },
  );
});
