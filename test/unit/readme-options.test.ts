import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { recipeBlock } from '../docs/support/doc-blocks.js';

const root = new URL('../../', import.meta.url);
const readme = readFileSync(new URL('README.md', root), 'utf8');

/** The property names of an exported interface, read from its source with the compiler. */
function members(file: string, name: string): string[] {
  const source = ts.createSourceFile(
    file,
    readFileSync(new URL(file, root), 'utf8'),
    ts.ScriptTarget.Latest,
  );
  const found = source.statements.find(
    (s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name,
  );
  if (!found) throw new Error(`no interface ${name} in ${file}`);
  return found.members.map((m) => (m.name as ts.Identifier).text);
}

/** The first column of the README table between `<!-- options:NAME -->` and `<!-- /options -->`. */
function documented(name: string): string[] {
  const start = readme.indexOf(`<!-- options:${name} -->`);
  const end = readme.indexOf('<!-- /options -->', start);
  if (start < 0 || end < 0) throw new Error(`README has no options table for ${name}`);
  return [...readme.slice(start, end).matchAll(/^\| `(\w+)` +\|/gm)].map((m) => m[1]!);
}

describe('the README option reference matches the option types', () => {
  it.each([
    ['lib/nest/module/options.ts', 'RateLimitModuleOptions'],
    ['lib/nest/declare/policy-options.ts', 'RateLimitOptions'],
    ['lib/nest/declare/decorators.ts', 'ConcurrencyLimitOptions'],
    ['lib/throttler/options.ts', 'ThrottlerOptions'],
    ['lib/throttler/redis-storage.ts', 'RateLimitRedisStorageOptions'],
  ])('%s: %s', (file, name) => {
    expect(documented(name)).toEqual(members(file, name));
  });
});

describe('the e2e test example of docs/guides/testing.md', () => {
  // A consumer project (npm run test:consumers) runs it against the packed package.
  it('is, word for word, a test of the Nest 11 consumer project', () => {
    const test = readFileSync(
      new URL('test/consumers/nest11-cjs-jest/test/readme.e2e-spec.ts', root),
      'utf8',
    );
    expect(test).toBe(recipeBlock('docs/guides/testing.md', 'cats-e2e'));
  });
});
