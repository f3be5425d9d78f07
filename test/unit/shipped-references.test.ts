import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * What a reader of the shipped code or of a test name cannot follow: a section of a design
 * file that is not in the repository, or a tracker's issue, review or finding number. Public
 * references stay allowed: `nestjs/throttler#2208`, `RFC 9110 §10.2.3`, `IBM §8.2`.
 */
const UNSHIPPED = [
  /\bDESIGN\b/,
  /\bissues?\s+#?\d/i,
  /\breview/i,
  /\bfindings?\s+\d/i,
  /\bregressions?\b/i,
  // A reviewer's tag such as `H2:` or `(M5)`.
  /(^|[\s(,'"`])[A-Z]\d{1,2}(:|\))/,
];

function unshipped(text: string): boolean {
  return UNSHIPPED.some((pattern) => pattern.test(text));
}

function files(dir: string, extensions: RegExp): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === 'node_modules' || entry.name === 'dist') return [];
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return files(path, extensions);
    return extensions.test(entry.name) ? [path] : [];
  });
}

/** Every line of lib/ (code, comments, TSDoc, Lua) that names something that does not ship. */
function libOffenders(): string[] {
  return files(join(root, 'lib'), /\.(ts|lua|js|json)$/).flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .flatMap((line, i) =>
        unshipped(line) ? [`${relative(root, file)}:${i + 1}: ${line.trim()}`] : [],
      ),
  );
}

function calleeName(callee: ts.Expression): string | undefined {
  let node = callee;
  for (;;) {
    if (ts.isCallExpression(node)) node = node.expression;
    else if (ts.isPropertyAccessExpression(node)) node = node.expression;
    else break;
  }
  return ts.isIdentifier(node) ? node.text : undefined;
}

/** The names given to `describe`, `it` and `test` (with `.each`, `.skip`…) in one file. */
function testNames(file: string): { line: number; name: string }[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const found: { line: number; name: string }[] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isCallExpression(node) &&
      ['describe', 'it', 'test'].includes(calleeName(node.expression)!)
    ) {
      const first = node.arguments[0];
      if (
        first &&
        (ts.isStringLiteral(first) ||
          ts.isNoSubstitutionTemplateLiteral(first) ||
          ts.isTemplateExpression(first))
      ) {
        const { line } = source.getLineAndCharacterOfPosition(first.getStart(source));
        found.push({ line: line + 1, name: first.getText(source) });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('only what ships is referenced', () => {
  it('the check catches design-file sections and tracker tags, and lets public references by', () => {
    const caught = [
      'decided atomically (DESIGN §4)',
      'see DESIGN.md',
      'never through the circuit breaker (issue 22)',
      'the 50-alias query of Issue #25',
      'batches of 100 (review M5)',
      'a store without refund (review)',
      'out-of-bounds fields (finding 4)',
      'regression (fresh-user tryout)',
      'H2: a handler with @Res() holds its slot',
      'kept releases (M5)',
    ];
    const allowed = [
      'counts as no block (nestjs/throttler#2208)',
      '`Retry-After` in seconds (RFC 9110 §10.2.3)',
      'the largest counts (IBM §8.2)',
      'issues one EVALSHA per request',
      'a design that holds',
      'IPv4: 203.0.113.7, HTTP/2 streams, api/v1',
    ];
    expect(caught.filter((text) => !unshipped(text))).toEqual([]);
    expect(allowed.filter(unshipped)).toEqual([]);
  });

  it('lib/, whose comments become the shipped .d.ts hover text, names no unshipped file or tracker tag', () => {
    expect(libOffenders()).toEqual([]);
  });

  it('test names state the rule they prove, not the tracker entry it came from', () => {
    const offenders = files(join(root, 'test'), /\.(ts|mts|cts|js|mjs)$/).flatMap((file) =>
      testNames(file)
        .filter(({ name }) => unshipped(name))
        .map(({ line, name }) => `${relative(root, file)}:${line}: ${name}`),
    );
    expect(offenders).toEqual([]);
  });
});
