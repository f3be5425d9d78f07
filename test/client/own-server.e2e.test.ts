/**
 * The cooperative client against this module under every `headers.standard` (and `false`:
 * `X-RateLimit-*` alone, which carry no window), 5 per 1 s: a burst of 25, and 4 concurrent
 * loops of 10: every request delivered within its attempts, at most 3 server-sent 429s, within
 * 1.5× the least time the limit needs, plus 1 s.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { keys, RateLimit, type StandardDraft } from '../../lib/index.js';
import { STANDARD_DRAFTS } from '../../lib/http/headers.js';
import { createApp, type AppHandle } from '../e2e/support/app.js';
import { itMeetsTheTarget } from './support/workload.js';

@Controller('limited')
class LimitedController {
  @Get()
  @RateLimit('5/s', { key: keys.header('x-client') })
  get() {
    return { ok: true };
  }
}

const STANDARDS: (StandardDraft | false)[] = [...STANDARD_DRAFTS, false];

describe.each(STANDARDS)(
  'the cooperative client against this module, headers.standard %s',
  (standard) => {
    let h: AppHandle;
    const server = `nest-rate-limit standard ${String(standard)}`;
    beforeAll(async () => {
      h = await createApp('express', { headers: { standard } }, [LimitedController]);
    });
    afterAll(() => h?.close());

    itMeetsTheTarget(server, () => h.url);
  },
);
