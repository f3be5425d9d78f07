/**
 * Count by outcome over HTTP (issue 15): `count: 'failed'` spends on decision and refunds
 * once the response shows success, on Express and Fastify, Redis and memory. The refund
 * follows the response, so the tests wait for it to land before the next step.
 */
import 'reflect-metadata';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Query, Req, UnauthorizedException } from '@nestjs/common';
import { get } from 'node:http';
import type { Socket } from 'node:net';
import { keys, RateLimit, RateLimitService, type PolicyInput } from '../../lib/index.js';
import { createApp, PLATFORMS, pollUntil, type AppHandle } from './support/app.js';

@Controller('auth')
class AuthController {
  @Get('login')
  @RateLimit('5/15m', { key: keys.ip, count: 'failed' })
  login(@Query('password') password: string) {
    if (password !== 'right') throw new UnauthorizedException();
    return 'welcome';
  }

  @Get('stacked')
  @RateLimit('3/m', { name: 'burst', key: keys.ip, count: 'failed' })
  @RateLimit('100/d', { name: 'daily', key: keys.ip, count: 'failed' })
  stacked(@Query('password') password: string) {
    if (password !== 'right') throw new UnauthorizedException();
    return 'welcome';
  }

  @Get('slow')
  @RateLimit('5/m', { key: keys.ip, count: 'failed' })
  async slow(@Req() req: { socket: Socket }) {
    const gate = slowGate;
    const hungUp = deferred();
    req.socket.once('close', hungUp.resolve);
    gate.entered.resolve();
    // Answers only once its client has hung up (after Node has told the response so).
    await hungUp.promise;
    gate.returned.resolve();
    return 'done';
  }
}

/** A promise and its resolve. */
function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** The slow handler's steps, awaited in order rather than timed. */
const gate = () => ({ entered: deferred(), returned: deferred() });
let slowGate = gate();

const IP = 'ip:127.0.0.1';
const login: PolicyInput = { rate: '5/15m', scope: 'AuthController.login' };
const burst: PolicyInput = { name: 'burst', rate: '3/m', scope: 'AuthController.stacked' };
const daily: PolicyInput = { name: 'daily', rate: '100/d', scope: 'AuthController.stacked' };
const slow: PolicyInput = { rate: '5/m', scope: 'AuthController.slow' };

describe.each(PLATFORMS)('count by outcome on %s', (platform) => {
  describe.each(['redis', 'memory'] as const)('on %s', (store) => {
    let h: AppHandle;
    let service: RateLimitService;
    beforeAll(async () => {
      h = await createApp(platform, store === 'memory' ? { store: 'memory' } : {}, [
        AuthController,
      ]);
      service = h.app.get(RateLimitService);
    });
    afterAll(() => h.close());

    const remaining = async (...policies: PolicyInput[]) =>
      (await service.peek(IP, policies)).policies.map((p) => p.remaining);
    const settled = (policies: PolicyInput[], expected: number[]) =>
      pollUntil(async () => (await remaining(...policies)).join() === expected.join(), 2000);

    it('5 failed logins, then the 6th is refused even with the right password; successes in between spend nothing', async () => {
      for (let i = 0; i < 5; i++) {
        expect((await h.get('/auth/login?password=wrong')).status).toBe(401);
        expect(await remaining(login)).toEqual([4 - i]);
        if (i < 4) {
          expect((await h.get('/auth/login?password=right')).status).toBe(200);
          expect(await settled([login], [4 - i])).toBe(true);
        }
      }
      const sixth = await h.get('/auth/login?password=right');
      expect(sixth.status).toBe(429);
      expect(await remaining(login)).toEqual([0]);
    });

    it('stacked burst + daily are both refunded by a success, and both spent by a failure', async () => {
      expect((await h.get('/auth/stacked?password=right')).status).toBe(200);
      expect(await settled([burst, daily], [3, 100])).toBe(true);
      expect((await h.get('/auth/stacked?password=wrong')).status).toBe(401);
      expect(await remaining(burst, daily)).toEqual([2, 99]);
    });

    it('a request whose client hangs up before the response keeps its spending', async () => {
      // A connection of its own (no pool), closed by the client while the handler runs.
      slowGate = gate();
      const request = get(`${h.url}/auth/slow`, { agent: false });
      request.on('error', () => undefined);
      await slowGate.entered.promise;
      expect(await remaining(slow)).toEqual([4]);
      request.destroy();
      await slowGate.returned.promise;
      // Past the handler's end: a success would be refunded as its response is written, in
      // the turns that follow; 300 ms is only how long this looks for a refund that must
      // not come.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await remaining(slow)).toEqual([4]);
    });
  });
});
