// `npm run lint:api`: the public API of every entry point against its committed report in
// api/ (one `<entry>.api.md` each, written by API Extractor). A change to what the package
// exports, or to the shape of an exported type, fails until the report is updated with
// `npm run lint:api -- --update`, so it shows as a diff in review.
//
// API Extractor reads declarations, and lint runs before any build (on a fresh clone, right
// after `npm ci`): the declarations are emitted here, alone, into .api-declarations/ (inside
// the project, so that a report names a file by its path in it, the same on every machine;
// not under node_modules, which API Extractor takes for other packages).
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, URL } from 'node:url';
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';

const root = fileURLToPath(new URL('..', import.meta.url));
const update = process.argv.includes('--update');

// Each subpath of package.json's `exports` with code, and the file its declarations come from.
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const entries = Object.entries(pkg.exports)
  .filter(([, target]) => typeof target === 'object')
  .map(([subpath, target]) => ({
    report: subpath === '.' ? pkg.name : `${pkg.name}-${subpath.slice(2).replaceAll('/', '-')}`,
    declarations: target.require.types.replace(/^\.\/dist\/cjs\//, ''),
  }));

const out = join(root, '.api-declarations');
rmSync(out, { recursive: true, force: true });
try {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(
    process.execPath,
    [tsc, '-p', join(root, 'tsconfig.build.json'), '--emitDeclarationOnly', '--outDir', out],
    { stdio: 'inherit' },
  );
  let failed = 0;
  for (const entry of entries) {
    const config = ExtractorConfig.prepare({
      configObjectFullPath: join(root, 'api', 'api-extractor.json'),
      packageJsonFullPath: join(root, 'package.json'),
      configObject: {
        projectFolder: root,
        mainEntryPointFilePath: join(out, entry.declarations),
        compiler: {
          overrideTsconfig: {
            compilerOptions: {
              module: 'commonjs',
              moduleResolution: 'bundler',
              target: 'ES2022',
              lib: ['ES2022'],
              types: ['node'],
              strict: true,
              skipLibCheck: true,
            },
            files: [join(out, entry.declarations)],
          },
        },
        apiReport: {
          enabled: true,
          reportFileName: entry.report,
          reportFolder: join(root, 'api'),
          reportTempFolder: join(out, 'reports'),
        },
        docModel: { enabled: false },
        dtsRollup: { enabled: false },
        tsdocMetadata: { enabled: false },
        messages: {
          compilerMessageReporting: { default: { logLevel: 'warning' } },
          extractorMessageReporting: {
            default: { logLevel: 'warning' },
            // Every export is public: the package has no alpha or beta channel to tag.
            'ae-missing-release-tag': { logLevel: 'none' },
            // Documentation coverage is not what this check is for.
            'ae-undocumented': { logLevel: 'none', addToApiReportFile: false },
            // A type reachable from an export but not exported itself is written into the
            // report (a line a reviewer sees), not failed: an entry may reach a type that
            // another entry exports (the throttler's storages hold a RateLimiter), which
            // API Extractor, reading one entry at a time, cannot tell.
            'ae-forgotten-export': { logLevel: 'none', addToApiReportFile: true },
            // A {@link} to a name of another entry.
            'ae-unresolved-link': { logLevel: 'none', addToApiReportFile: false },
          },
          // The TSDoc is written for readers of the source, not for API Documenter.
          tsdocMessageReporting: { default: { logLevel: 'none' } },
        },
      },
    });
    const result = Extractor.invoke(config, {
      localBuild: update,
      printApiReportDiff: !update,
      messageCallback: quiet,
    });
    if (!result.succeeded) {
      failed++;
      console.error(
        result.apiReportChanged
          ? `api/${entry.report}.api.md differs from the exports of ${entry.declarations}: ` +
              'review the change, then `npm run lint:api -- --update` and commit the report.'
          : `${entry.declarations}: ${result.errorCount} errors, ${result.warningCount} warnings.`,
      );
    }
  }
  if (failed > 0) process.exitCode = 1;
  else console.log(`API reports match: ${entries.map((e) => `api/${e.report}.api.md`).join(', ')}`);
} finally {
  rmSync(out, { recursive: true, force: true });
}

/** Drops API Extractor's progress lines; warnings and errors are printed. */
function quiet(message) {
  if (message.logLevel === 'info' || message.logLevel === 'verbose') message.handled = true;
}
