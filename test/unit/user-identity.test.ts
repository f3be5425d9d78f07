/**
 * The user's id as an identity (issue 22, finding 8): `keys.userOrIp` silently fell back to
 * the IP when `user.id` was a bigint or an object (a MongoDB ObjectId), so seven users behind
 * one address shared one budget, with no log line.
 */
import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host.js';
import { keys } from '../../lib/index.js';
import { userIdentity } from '../../lib/http/identities.js';
import { identitiesOf } from '../../lib/nest/pipeline/stages/identify.js';
import { RateLimitEvents } from '../../lib/nest/observability/events.js';

/** What an ObjectId is as far as an identity goes: an object that spells itself. */
class ObjectIdLike {
  constructor(private readonly hex: string) {}
  toString(): string {
    return this.hex;
  }
}

describe('userIdentity', () => {
  it('reads string, number, bigint and self-spelling object ids', () => {
    expect(userIdentity({ id: 'alice' })).toBe('user:alice');
    expect(userIdentity({ id: 42 })).toBe('user:42');
    expect(userIdentity({ id: 9007199254740993n })).toBe('user:9007199254740993');
    expect(userIdentity({ id: new ObjectIdLike('65f1c0ffee00000000000001') })).toBe(
      'user:65f1c0ffee00000000000001',
    );
    expect(userIdentity({ sub: 'auth0|7' })).toBe('user:auth0|7');
  });

  it('is undefined for an anonymous call or a user without an id', () => {
    expect(userIdentity(undefined)).toBeUndefined();
    expect(userIdentity(null)).toBeUndefined();
    expect(userIdentity({ name: 'no id' })).toBeUndefined();
  });

  it('refuses an id that spells nothing, naming it', () => {
    expect(() => userIdentity({ id: { nested: 1 } })).toThrow(
      expect.objectContaining({
        name: 'RateLimitConfigError',
        message: expect.stringContaining('{"nested":1}'),
      }),
    );
    expect(() => userIdentity({ id: true })).toThrow(
      expect.objectContaining({ name: 'RateLimitConfigError' }),
    );
  });
});

describe('keys.userOrIp with ids of every kind', () => {
  function identityOf(user: unknown, events: RateLimitEvents): string | Promise<string> {
    const request = { ip: '203.0.113.5', headers: {}, user };
    const ctx = new ExecutionContextHost([request, {}]);
    ctx.setType('http');
    return identitiesOf(ctx, request, 'Users.list', {}, events)(keys.userOrIp);
  }

  it('seven users behind one address, ids of every kind, get seven identities', () => {
    const lines: string[] = [];
    const events = new RateLimitEvents({ warn: (l: string) => lines.push(l) } as never);
    const users = [
      { id: 'a' },
      { id: 2 },
      { id: 3n },
      { id: 4n },
      { id: new ObjectIdLike('65f1c0ffee00000000000005') },
      { id: new ObjectIdLike('65f1c0ffee00000000000006') },
      { sub: 'seven' },
    ];
    const identities = users.map((user) => identityOf(user, events));
    expect(new Set(identities).size).toBe(7);
    expect(identities).toContain('user:3');
    expect(lines).toEqual([]);
  });

  it('a user whose id spells nothing is limited by address, and logged', () => {
    const lines: string[] = [];
    const events = new RateLimitEvents({ warn: (l: string) => lines.push(l) } as never);
    expect(identityOf({ id: { nested: 1 } }, events)).toBe('ip:203.0.113.5');
    expect(lines).toEqual([
      expect.stringMatching(/^rate_limit\.config_error .*"route":"Users\.list"/),
    ]);
  });
});
