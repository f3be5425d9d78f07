/**
 * Penalties over HTTP (issue 15): `block` on a policy, on Express and Fastify, Redis and
 * memory. The exact timing with an injected clock is in test/conformance/penalties.ts.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { performance } from 'node:perf_hooks';
import { Controller, Get } from '@nestjs/common';
import { RateLimit, RateLimitService } from '../../lib/index.js';
import { createApp, PLATFORMS, times, type AppHandle } from './support/app.js';

@Controller('login')
class LoginController {
  @Get()
  @RateLimit('5/m', { block: '15m' })
  login() {
    return 'ok';
  }
}

describe.each(PLATFORMS)('penalties on %s', (platform) => {
  describe.each(['redis', 'memory'] as const)('on %s', (store) => {
    let h: AppHandle;
    beforeAll(async () => {
      h = await createApp(
        platform,
        store === 'memory' ? { store: 'memory' } : {},
        [LoginController],
        {
          userFromHeader: true,
        },
      );
    });
    afterAll(() => h.close());

    it("5/m with block: '15m': the 6th request gets Retry-After 900, 100 more refusals keep it, reset lifts it", async () => {
      const client = { 'x-user': 'pat' };
      const first = await times(6, () => h.get('/login', client));
      expect(first.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
      expect(first[5]!.headers.get('retry-after')).toBe('900');
      expect(first[5]!.rl['x-ratelimit-remaining']).toBe('0');
      const started = performance.now();
      const more = await times(100, () => h.get('/login', client));
      const elapsedS = (performance.now() - started) / 1000;
      expect(new Set(more.map((r) => r.status))).toEqual(new Set([429]));
      // The block's end does not move: each wait is what is left of the 900 s, rounded up,
      // never longer than the one before, and shorter only by the time that passed.
      const waits = more.map((r) => Number(r.headers.get('retry-after')));
      waits.forEach((wait, i) => expect(wait).toBeLessThanOrEqual(i === 0 ? 900 : waits[i - 1]!));
      expect(Math.min(...waits)).toBeGreaterThanOrEqual(900 - Math.ceil(elapsedS));
      // The policy's state and its block.
      expect(await h.app.get(RateLimitService).reset('user:pat')).toBe(2);
      expect((await h.get('/login', client)).status).toBe(200);
    });
  });
});
