/**
 * Reads a docs page's code blocks by their `<!-- recipe: NAME -->` marker, writes each as a
 * module under test/.doc-blocks/ (git-ignored) with `'nest-rate-limit'` pointing at
 * recipe-package.ts, type-checks it with the repository's compiler options, and imports it:
 * the test runs the page's code as a reader copies it.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import ts from 'typescript';

const root = new URL('../../../', import.meta.url);
const outDir = new URL('test/.doc-blocks/', root);

/** The page's text (path from the repository root, e.g. `docs/guides/testing.md`). */
function readPage(page: string): string {
  return readFileSync(new URL(page, root), 'utf8');
}

/**
 * The code of the first fenced block after `<!-- recipe: name -->` on `page`.
 * @throws {Error} when the page has no such marker or no block after it
 */
export function recipeBlock(page: string, name: string): string {
  const text = readPage(page);
  const marker = text.indexOf(`<!-- recipe: ${name} -->`);
  if (marker < 0) throw new Error(`${page} has no <!-- recipe: ${name} --> marker`);
  const block = /```\w*\n([\s\S]*?)```/.exec(text.slice(marker));
  if (!block) throw new Error(`${page}: no code block after the ${name} marker`);
  return block[1]!;
}

/**
 * Writes `code` as test/.doc-blocks/`file`.ts with the package import rewritten, and returns
 * its URL. Each file is imported once, so a recipe needed twice (one app per platform) is
 * written under two names.
 */
export function writeBlock(file: string, code: string): URL {
  mkdirSync(outDir, { recursive: true });
  const url = new URL(`${file}.ts`, outDir);
  const rewritten = code.replace(
    /from '(nest-rate-limit)'/g,
    "from '../docs/support/recipe-package.js'",
  );
  writeFileSync(url, rewritten);
  return url;
}

/** The compiler's errors for `files` (and nothing else), as `file(line): message` lines. */
export function typeErrors(files: URL[]): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    new URL('tsconfig.json', root).pathname,
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined },
  )!;
  const names = files.map((f) => f.pathname);
  const program = ts.createProgram(names, { ...config.options, noEmit: true });
  const errors: string[] = [];
  for (const name of names) {
    const source = program.getSourceFile(name)!;
    for (const d of [
      ...program.getSyntacticDiagnostics(source),
      ...program.getSemanticDiagnostics(source),
    ]) {
      const line = d.start === undefined ? 0 : source.getLineAndCharacterOfPosition(d.start).line;
      errors.push(`${name}(${line + 1}): ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    }
  }
  return errors;
}
