// `npm run check:docs`: the docs hold code that compiles and links that resolve.
//
// 1. Every ```ts block of README.md and docs/**/*.md is written as a module of its own into
//    .check-docs/ (inside the repository, so that its imports of Nest, ioredis… resolve from our
//    node_modules) and all of them are compiled in ONE tsc run against the built package
//    (dist/, from `npm run build`): 'nest-rate-limit' and its subpaths resolve through the
//    package's own `exports`, by its name. A block preceded by the line
//    `<!-- check-docs: fragment -->` is a fragment and is skipped.
// 2. Every relative link and anchor of those pages, CONTRIBUTING.md and bench/README.md is
//    checked by remark-validate-links (through remark-cli).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, URL } from 'node:url';
import { performance } from 'node:perf_hooks';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, '.check-docs');
const FRAGMENT = '<!-- check-docs: fragment -->';
const started = performance.now();

function markdown(dir) {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return markdown(path);
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

const pages = ['README.md', ...(existsSync(join(root, 'docs')) ? markdown('docs') : [])].sort();

/** The ```ts blocks of one page: the line its code starts on, its code, and whether it is a fragment. */
function blocks(page) {
  const lines = readFileSync(join(root, page), 'utf8').split('\n');
  const found = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*```(ts|typescript)\s*$/.test(lines[i])) continue;
    const indent = /^\s*/.exec(lines[i])[0].length;
    let end = i + 1;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end])) end++;
    let before = i - 1;
    while (before >= 0 && lines[before].trim() === '') before--;
    found.push({
      line: i + 2,
      code: lines
        .slice(i + 1, end)
        .map((l) => l.slice(Math.min(indent, /^\s*/.exec(l)[0].length)))
        .join('\n'),
      fragment: before >= 0 && lines[before].trim() === FRAGMENT,
    });
    i = end;
  }
  return found;
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const files = new Map();
let compiled = 0;
let fragments = 0;
for (const page of pages) {
  for (const block of blocks(page)) {
    if (block.fragment) {
      fragments++;
      continue;
    }
    const name = `${page.replace(/[/.]/g, '_')}_L${block.line}.ts`;
    files.set(name, { page, line: block.line });
    writeFileSync(join(out, name), block.code + '\n');
    compiled++;
  }
}

// Nest's decorators need experimentalDecorators; moduleDetection makes every block a module
// (top-level await included); `bundler` resolution reads the package's `exports` by its own
// name, so the blocks import exactly what a user's project would.
writeFileSync(
  join(out, 'tsconfig.json'),
  JSON.stringify(
    {
      compilerOptions: {
        strict: true,
        skipLibCheck: true,
        noEmit: true,
        target: 'es2022',
        module: 'preserve',
        moduleResolution: 'bundler',
        moduleDetection: 'force',
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
        esModuleInterop: true,
        types: ['node'],
        paths: {
          'nest-rate-limit': ['../dist/esm/index.d.ts'],
          'nest-rate-limit/client': ['../dist/esm/client/index.d.ts'],
          'nest-rate-limit/client/axios': ['../dist/esm/client/axios-adapter.d.ts'],
          'nest-rate-limit/graphql': ['../dist/esm/graphql/index.d.ts'],
          'nest-rate-limit/throttler': ['../dist/esm/throttler/index.d.ts'],
        },
      },
      include: ['*.ts'],
    },
    null,
    2,
  ),
);

let failed = false;
if (!existsSync(join(root, 'dist/esm/index.d.ts'))) {
  console.error('check:docs: no dist/ (run `npm run build` first)');
  process.exit(1);
}
if (compiled > 0) {
  const tsc = spawnSync(
    process.execPath,
    [
      join(root, 'node_modules/typescript/bin/tsc'),
      '-p',
      join(out, 'tsconfig.json'),
      '--pretty',
      'false',
    ],
    { encoding: 'utf8' },
  );
  const report = (tsc.stdout + tsc.stderr).replace(
    /^([\w.-]+\.ts)\((\d+),(\d+)\)/gm,
    (all, file, line, column) => {
      const at = files.get(file);
      return at ? `${at.page}:${at.line + Number(line) - 1}:${column}` : all;
    },
  );
  if (tsc.status !== 0) {
    failed = true;
    process.stderr.write(report);
    console.error(
      `check:docs: code blocks do not compile (a block that is not a whole module is preceded by "${FRAGMENT}")`,
    );
  }
}

const linked = [...pages, 'CONTRIBUTING.md', 'bench/README.md'].filter((p) =>
  existsSync(join(root, p)),
);
const remark = spawnSync(
  process.execPath,
  [
    join(root, 'node_modules/remark-cli/cli.js'),
    '--no-stdout',
    '--quiet',
    '--frail',
    '--no-ignore',
    '--use',
    'remark-validate-links=repository:false',
    ...linked,
  ],
  { cwd: root, encoding: 'utf8' },
);
if (remark.status !== 0) {
  failed = true;
  process.stderr.write(remark.stdout + remark.stderr);
  console.error('check:docs: broken relative links or anchors');
}

if (!failed) rmSync(out, { recursive: true, force: true });
const seconds = ((performance.now() - started) / 1000).toFixed(1);
console.log(
  `check:docs: ${compiled} code blocks compiled, ${fragments} fragments skipped, in ${pages.length} pages; ` +
    `links checked in ${linked.length} files (${relative(root, out)}/ kept on failure); ${seconds} s`,
);
process.exit(failed ? 1 : 0);
