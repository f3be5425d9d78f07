import { Body, Controller, HttpCode, Post, UnauthorizedException } from '@nestjs/common';
import { RateLimit, keys } from 'nest-rate-limit';

/** Logins: the classic brute-force target. */
@Controller('auth')
export class AuthController {
  @Post('login')
  @HttpCode(200)
  // Per address, because the attacker has no account yet; fail-closed, because a Redis
  // outage must not open the door to unlimited guessing; no wait in the 429 body, so the
  // page tells an attacker nothing (the Retry-After header still does, for real clients).
  @RateLimit('5/m', { key: keys.ip, failClosed: true, exposeDetails: false, scope: 'auth' })
  login(@Body() body?: { username?: string; password?: string }) {
    // A demo credential check: every attempt counts against the limit, right or wrong.
    if (body?.username === 'demo' && body.password === 'correct horse battery staple') {
      return { token: 'demo-token' };
    }
    throw new UnauthorizedException('wrong username or password');
  }
}
