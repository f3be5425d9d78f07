import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { recipeBlock } from '../docs/support/doc-blocks.js';

const root = new URL('../../', import.meta.url);
/** The pages that hold each option reference, read whole. */
const page = (path: string) => readFileSync(new URL(path, root), 'utf8');

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

/** The option headings (`### \`name\``) of a page between `<!-- options:NAME -->` and `<!-- /options -->`. */
function documented(text: string, name: string): string[] {
  const start = text.indexOf(`<!-- options:${name} -->`);
  const end = text.indexOf('<!-- /options -->', start);
  if (start < 0 || end < 0) throw new Error(`no option reference for ${name}`);
  return [...text.slice(start, end).matchAll(/^### `(\w+)`$/gm)].map((m) => m[1]!);
}

describe('the option reference in docs/ matches the option types', () => {
  it.each([
    ['lib/nest/module/options.ts', 'RateLimitModuleOptions', 'docs/reference/module-options.md'],
    ['lib/nest/declare/policy-options.ts', 'RateLimitOptions', 'docs/reference/decorators.md'],
    ['lib/nest/declare/decorators.ts', 'ConcurrencyLimitOptions', 'docs/reference/decorators.md'],
    ['lib/throttler/options.ts', 'ThrottlerOptions', 'docs/guides/migrating-from-throttler.md'],
    [
      'lib/throttler/redis-storage.ts',
      'RateLimitRedisStorageOptions',
      'docs/guides/migrating-from-throttler.md',
    ],
  ])('%s: %s (%s)', (file, name, doc) => {
    expect(documented(page(doc), name)).toEqual(members(file, name));
  });
});

describe('the options at a glance in README.md', () => {
  it('list every module option, each linked to its entry', () => {
    const names = members('lib/nest/module/options.ts', 'RateLimitModuleOptions');
    const rows = [
      ...page('README.md').matchAll(
        /^\| \[`(\w+)`\]\(docs\/reference\/module-options\.md#(\w+)\)/gm,
      ),
    ];
    expect(rows.map((m) => m[1])).toEqual(names);
    for (const m of rows) expect(m[2]).toBe(m[1]!.toLowerCase());
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

  it("tests the controller the page shows, the consumer project's word for word", () => {
    const controller = readFileSync(
      new URL('test/consumers/nest11-cjs-jest/src/cats/cats.controller.ts', root),
      'utf8',
    );
    const block = recipeBlock('docs/guides/testing.md', 'cats-controller');
    expect(block).toBe(`// src/cats/cats.controller.ts\n${controller}`);
  });
});
