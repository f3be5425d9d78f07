// `npm test`: Jest in ESM mode over the whole suite, in parallel workers, then the suites that
// measure latency (jest.config.js, TIMING) alone, so another worker's load does not stretch
// them. Arguments go to both passes: `npm test -- test/e2e/keys.test.ts` runs just that file.
import { spawnSync } from 'node:child_process';
import { fileURLToPath, URL } from 'node:url';

// The path `npm test` always used; jest's `exports` do not list its bin for resolve().
const jest = fileURLToPath(new URL('../node_modules/jest/bin/jest.js', import.meta.url));
const args = process.argv.slice(2);

// The timing pass runs in band, which Jest refuses beside a worker count.
const workerCount = /^(--maxWorkers|-w)(=|$)/;
const inBand = args.filter(
  (arg, i) => !workerCount.test(arg) && !/^(--maxWorkers|-w)$/.test(args[i - 1] ?? ''),
);

function pass(extra, env, passArgs = args) {
  const { status, signal } = spawnSync(
    process.execPath,
    ['--experimental-vm-modules', jest, ...extra, ...passArgs],
    { stdio: 'inherit', env: { ...process.env, ...env } },
  );
  return signal ? 1 : (status ?? 1);
}

const parallel = pass(['--passWithNoTests'], { NRL_TIMING: '' });
const timing = pass(['--runInBand', '--passWithNoTests'], { NRL_TIMING: '1' }, inBand);
process.exit(parallel || timing);
