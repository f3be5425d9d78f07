import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import {
  identityTag,
  policyKey,
  scopeAndNameOf,
  scopeKeyPrefix,
} from '../../lib/core/model/store-keys.js';

/** The hashed tag, computed independently of the library. */
function hashed(identity: string): string {
  return 'h:' + createHash('sha256').update(identity, 'utf16le').digest('base64url').slice(0, 22);
}

describe('identityTag', () => {
  it.each(['user:42', 'ip:203.0.113.7', 'ip:2001:db8::/64', 'ip:::ffff:1.2.3.4', 'a', '|~!'])(
    'keeps the plain identity %p as it is',
    (identity) => {
      expect(identityTag(identity)).toBe(identity);
    },
  );

  it('keeps an identity of exactly 64 characters', () => {
    const identity = 'u'.repeat(64);
    expect(identityTag(identity)).toBe(identity);
  });

  it('hashes an identity of 65 characters', () => {
    const identity = 'u'.repeat(65);
    expect(identityTag(identity)).toBe(hashed(identity));
  });

  it.each([
    ['an opening brace', 'user:{42'],
    ['a closing brace', 'user:42}'],
    ['a full hash tag', '{user:42}'],
    ['a newline', 'user:42\n'],
    ['a space', 'user 42'],
    ['a tab', 'user\t42'],
    ['a NUL', 'user:\u000042'],
    ['DEL', 'user:\u007f'],
    ['an accented letter', 'usér'],
    ['CJK characters', '用户'],
    ['nothing (the empty string)', ''],
    ['the h: prefix', 'h:abc'],
    ['the h: prefix of a real tag', hashed('user:42')],
  ])('hashes an identity with %s', (_label, identity) => {
    const tag = identityTag(identity);
    expect(tag).toBe(hashed(identity));
    expect(tag).toMatch(/^h:[A-Za-z0-9_-]{22}$/);
  });

  it('gives the exact known tag for the empty string', () => {
    // sha256('') = 47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU in base64url
    expect(identityTag('')).toBe('h:47DEQpj8HBSa-_TImW-5JC');
  });

  it('does not let an identity starting with h: land in the bucket it names', () => {
    const tag = identityTag('user:42'.repeat(10));
    expect(tag.startsWith('h:')).toBe(true);
    expect(identityTag(tag)).not.toBe(tag);
    expect(identityTag(tag)).toBe(hashed(tag));
  });

  it('hashed tags never contain { or }', () => {
    const inputs = ['{', '}', '{}', 'a}b{c', '\n{', 'x'.repeat(1000) + '}'];
    for (let i = 0; i < 500; i++) inputs.push(`{${i}}`);
    for (const identity of inputs) {
      const tag = identityTag(identity);
      expect(tag).not.toMatch(/[{}]/);
      expect(tag).toHaveLength(24);
    }
  });

  it('gives different identities different tags', () => {
    expect(identityTag('usér')).not.toBe(identityTag('user'));
    expect(identityTag('a'.repeat(65))).not.toBe(identityTag('a'.repeat(66)));
  });

  // Bug: the string is UTF-8 encoded before hashing, and a lone UTF-16 surrogate encodes as
  // U+FFFD, so distinct identities share one bucket. Such ids arise e.g. from JSON.parse of
  // '"user:\\ud800"' in a token claim. Hashing a lossless encoding (e.g. UTF-16LE bytes, or
  // JSON.stringify(identity)) would keep them apart.
  it('gives identities that differ only by a lone surrogate different tags', () => {
    const tags = new Set(['user:\uD800', 'user:\uDBFF', 'user:\uFFFD'].map(identityTag));
    expect(tags.size).toBe(3);
  });
});

describe('policyKey', () => {
  it('builds <prefix>:{<identity>}:<scope>:<policy>:<tag>', () => {
    expect(policyKey('rl', 'user:42', 'ReportsController.export', 'burst', 'tb')).toBe(
      'rl:{user:42}:ReportsController.export:burst:tb',
    );
  });

  it('uses the hashed tag inside the braces for an unusual identity', () => {
    expect(policyKey('rl', 'a{b}', 'global', 'default', 'gcra')).toBe(
      `rl:{${hashed('a{b}')}}:::gcra`,
    );
  });

  // Issue 37: `rl:{ip:203.0.113.7}:global:default:gcra` (39 characters) took 88 B of Redis
  // memory; up to 30 characters a key takes 72 B.
  it('writes the scope global and the name default empty: 30 characters for any IPv4', () => {
    expect(policyKey('rl', 'ip:203.0.113.7', 'global', 'default', 'tb')).toBe(
      'rl:{ip:203.0.113.7}:::tb',
    );
    expect(policyKey('rl', 'ip:255.255.255.255', 'global', 'default', 'gcra')).toBe(
      'rl:{ip:255.255.255.255}:::gcra',
    );
    expect('rl:{ip:255.255.255.255}:::gcra').toHaveLength(30);
    expect(policyKey('rl', 'user:42', 'global', 'burst', 'tb')).toBe('rl:{user:42}::burst:tb');
    expect(policyKey('rl', 'user:42', 'reports', 'default', 'tb')).toBe('rl:{user:42}:reports::tb');
  });

  it.each([
    ['global', 'default'],
    ['global', 'burst'],
    ['reports', 'default'],
    ['ReportsController.export', 'burst'],
    ['a/b.c-d_e', 'x.y-z_1'],
  ])('reads scope %p and name %p back from the key, suffixes included', (scope, name) => {
    const key = policyKey('rl', 'user:42', scope, name, 'gcra');
    const rest = key.slice('rl:{user:42}:'.length);
    for (const suffix of ['', ':o1700000000000', ':b']) {
      expect(scopeAndNameOf(rest + suffix)).toEqual([scope, name]);
    }
    expect(key.startsWith(scopeKeyPrefix('rl', 'user:42', scope))).toBe(true);
  });

  it("gives each scope a key prefix no other scope's keys start with", () => {
    const scopes = ['global', 'g', 'globa', 'global2', 'reports', 'reports.v2', 'r'];
    for (const a of scopes) {
      for (const b of scopes) {
        const key = policyKey('rl', 'user:42', b, 'default', 'tb');
        expect(key.startsWith(scopeKeyPrefix('rl', 'user:42', a))).toBe(a === b);
      }
    }
  });

  it('keeps the key short for a 10 KB identity', () => {
    const identity = 'k'.repeat(10 * 1024);
    const key = policyKey('rl', identity, 'ReportsController.export', 'burst', 'tb');
    expect(key.length).toBeLessThan(100);
    expect(key).toBe(`rl:{${hashed(identity)}}:ReportsController.export:burst:tb`);
  });
});
