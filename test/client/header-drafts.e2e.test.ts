/**
 * `headers.standard` on real apps (issue 24): for each draft, our own parser reads the
 * responses back, and the express-rate-limit project's parser (ratelimit-header-parser, which
 * knows drafts 6 and 7 and X-RateLimit-*) reads the drafts it supports.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get } from '@nestjs/common';
import { parseRateLimit } from 'ratelimit-header-parser';
import { keys, RateLimit, type StandardDraft } from '../../lib/index.js';
import { STANDARD_DRAFTS } from '../../lib/http/headers.js';
import { parseRateLimitFields } from '../../lib/client/index.js';
import { createApp, PLATFORMS, type AppHandle } from '../e2e/support/app.js';

@Controller('drafts')
class DraftsController {
  @Get()
  // A fixed window of 10 s: a slow machine cannot refill it between the requests of a test.
  @RateLimit('5/10s', { name: 'burst', key: keys.header('x-client'), algorithm: 'fixed-window' })
  @RateLimit('100/m', { name: 'minute', key: keys.header('x-client') })
  get() {
    return { ok: true };
  }
}

const cases = PLATFORMS.flatMap((platform) =>
  STANDARD_DRAFTS.map((standard) => [platform, standard] as [string, StandardDraft]),
);

describe.each(cases)('%s with headers.standard %s', (platform, standard) => {
  let h: AppHandle;
  let n = 0;
  beforeAll(async () => {
    h = await createApp(platform as 'express', { headers: { standard } }, [DraftsController]);
  });
  afterAll(() => h?.close());

  const send = () =>
    fetch(`${h.url}/drafts`, { headers: { 'x-client': `${platform}-${standard}-${++n}` } });

  it('our parser reads the tightest quota of an admitted response and of a refusal', async () => {
    const first = await send();
    expect(first.status).toBe(200);
    const fields = parseRateLimitFields(first.headers);
    expect(fields.form).toBe(
      standard === 'draft-6' ? 'draft-6' : standard === 'draft-7' ? 'draft-7' : 'structured',
    );
    expect(fields.tightest).toMatchObject({ remaining: 4, limit: 5, windowSeconds: 10 });
    if (fields.form === 'structured') {
      expect(fields.quotas.map((q) => [q.name, q.remaining, q.limit])).toEqual(
        expect.arrayContaining([
          ['burst', 4, 5],
          ['minute', 99, 100],
        ]),
      );
    }
    // The same client spends the rest of its burst, and is refused.
    const headers = { 'x-client': `${platform}-${standard}-${n}` };
    for (let i = 0; i < 4; i++) await fetch(`${h.url}/drafts`, { headers });
    const refused = await fetch(`${h.url}/drafts`, { headers });
    expect(refused.status).toBe(429);
    const denial = parseRateLimitFields(refused.headers);
    const wait = Number(refused.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(10);
    expect(denial.retryAfterMs).toBe(wait * 1000);
    expect(denial.tightest).toMatchObject({ remaining: 0, resetSeconds: wait, limit: 5 });
  });

  it('the express-rate-limit project parser reads drafts 6 and 7 (and X-RateLimit-* only without a structured RateLimit)', async () => {
    const response = await send();
    const parsed = parseRateLimit(response.headers);
    if (standard === 'draft-6' || standard === 'draft-7') {
      expect(parsed).toMatchObject({ limit: 5, remaining: 4, used: 1 });
    } else {
      // It takes a structured RateLimit for draft 7's dictionary and reads nothing, even with
      // X-RateLimit-* beside it: the reason to offer drafts 6 and 7 (README, The HTTP contract).
      expect(parsed?.remaining).toBeNaN();
    }
  });
});
