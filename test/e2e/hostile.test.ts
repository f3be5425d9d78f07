/**
 * Hostile identities (issue 5, item 5): a 10 KB API key, a 10 KB user id, and identities made
 * of `{`, `}`, `:`, newlines and unicode are limited like any other (2 admitted, then 429, no
 * 5xx), each in its own bucket, and keyed safely: every Redis key is short, carries exactly
 * one `{...}` hash tag, and never contains the raw secret or user input that could break out
 * of its tag.
 *
 * Rotating `X-Forwarded-For`, `X-Real-IP` and `Forwarded` without trustedProxies is covered by
 * test/e2e/keys.test.ts ('spoof-*' routes) and not repeated here.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, type ExecutionContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { keys, RateLimit } from '../../lib/index.js';
import { disconnect, newRedis } from '../harness/redis.js';
import { createApp, PLATFORMS, times, type AppHandle, type Reply } from './support/app.js';

/** The `id` query parameter as the identity: headers cannot carry newlines, a URL can. */
const fromQuery = (ctx: ExecutionContext) => {
  const id = ctx.switchToHttp().getRequest<{ query?: Record<string, unknown> }>().query?.id;
  return typeof id === 'string' ? id : undefined;
};

@Controller('hostile')
class HostileController {
  @Get('api')
  @RateLimit('2/m', { key: keys.header('x-api-key') })
  api() {
    return 'ok';
  }

  @Get('user')
  @RateLimit('2/m')
  user() {
    return 'ok';
  }

  @Get('id')
  @RateLimit('2/m', { key: fromQuery })
  id() {
    return 'ok';
  }
}

const TEN_KB = 10 * 1024;
/** A 10 KB secret from the URL-safe alphabet (a header value must be ASCII). */
const secret = () => randomBytes(TEN_KB).toString('base64url').slice(0, TEN_KB);

/** Identities meant to break out of the hash tag, collide with others, or upset Redis. */
const HOSTILE_IDS = [
  'victim',
  '{victim}',
  'victim}',
  '{victim',
  '}{',
  '{',
  '}',
  ':',
  'a:b:c',
  'x}:{y',
  'rl:{victim}:global',
  'h:abc',
  'a\nb',
  'a\r\nb',
  '\n',
  'ünïcødé',
  '🚀',
  '日本語',
  'q'.repeat(TEN_KB),
];

const codes = (replies: Reply[]) => replies.map((r) => r.status);

async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found;
}

const count = (text: string, char: string) => text.split(char).length - 1;

describe.each(PLATFORMS)('hostile identities, on %s', (platform) => {
  let h: AppHandle;
  let redis: Redis;
  const all: Reply[] = [];
  const apiKeys = [secret(), secret()];
  const userId = `u${secret()}`;

  beforeAll(async () => {
    h = await createApp(platform, {}, [HostileController], { userFromHeader: true });
    redis = newRedis();
  });
  afterAll(async () => {
    await h?.close();
    if (redis) disconnect(redis);
  });

  it('a 10 KB x-api-key is limited by its hash, each key in its own bucket', async () => {
    for (const apiKey of apiKeys) {
      const replies = await times(3, () => h.get('/hostile/api', { 'x-api-key': apiKey }));
      all.push(...replies);
      expect(codes(replies)).toEqual([200, 200, 429]);
    }
  });

  it('a 10 KB user id is limited like any other', async () => {
    const replies = await times(3, () => h.get('/hostile/user', { 'x-user': userId }));
    all.push(...replies);
    expect(codes(replies)).toEqual([200, 200, 429]);
    expect(replies.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['1', '0', '0']);
  });

  it('identities with { } : newlines and unicode each get their own bucket', async () => {
    for (const id of HOSTILE_IDS) {
      const path = `/hostile/id?id=${encodeURIComponent(id)}`;
      const replies = await times(3, () => h.get(path));
      all.push(...replies);
      expect({ id, codes: codes(replies) }).toEqual({ id, codes: [200, 200, 429] });
    }
    // The plain one is still spent: nothing above landed in its bucket, nor it in theirs.
    const victim = await h.get('/hostile/id?id=victim');
    expect(victim.status).toBe(429);
  });

  it('nothing answered 5xx', () => {
    expect(all.length).toBe(3 * (apiKeys.length + 1 + HOSTILE_IDS.length));
    expect(all.filter((r) => r.status >= 500)).toEqual([]);
  });

  it('every key is short, has exactly one {...} hash tag, and holds no raw secret', async () => {
    const found = await keysUnder(redis, h.prefix);
    // One key per bucket: two API keys, one user, one per hostile identity.
    expect(found).toHaveLength(apiKeys.length + 1 + HOSTILE_IDS.length);
    for (const key of found) {
      expect({ key, bytes: Buffer.byteLength(key) < 200 }).toEqual({ key, bytes: true });
      expect({ key, open: count(key, '{'), close: count(key, '}') }).toEqual({
        key,
        open: 1,
        close: 1,
      });
      expect(key.indexOf('{')).toBeLessThan(key.indexOf('}'));
      expect(key.startsWith(`${h.prefix}:{`)).toBe(true);
      for (const raw of [...apiKeys, userId]) expect(key).not.toContain(raw.slice(0, 16));
      expect(key).not.toMatch(/[\r\n]/);
      expect(key).toMatch(/^[\x21-\x7e]+$/); // printable ASCII only: no unicode, no spaces
    }
  });
});
