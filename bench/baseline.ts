/**
 * BENCH_BASELINE=<git ref>: that ref of this repository built in a temporary worktree, so
 * each of our variants runs beside its `@base` twin (twins.ts) in the same rounds and tables.
 *
 * The ref is checked out with `git worktree add --detach` in a temporary directory, given the
 * root's node_modules through a symlink (the dependencies are the same; a different
 * package-lock is reported) and built with its own scripts/build.mjs. Only its built package
 * entry is loaded (its package.json's `exports`/`main`), and one internal file, the Lua script
 * of part 3b, where the ref has it. `remove()` deletes the worktree; it also runs when the
 * process exits or is interrupted, so a failed run leaves none behind.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as Nrl from 'nest-rate-limit';

/** The package's public exports, as the current build types them (the ref's may lack some). */
export type NrlPackage = typeof Nrl;

export interface Baseline {
  /** The ref as given, and the commit it names. */
  readonly ref: string;
  readonly commit: string;
  /** The temporary worktree. */
  readonly dir: string;
  /** The built package entry the `@base` variants load (a file path). */
  readonly entry: string;
  readonly pkg: NrlPackage;
  /** The ref's consume script (part 3b), or undefined when its build has none where looked. */
  readonly consumeScript: string | undefined;
  /** Whether the ref's package-lock.json differs from the current one. */
  readonly lockDiffers: boolean;
  /** Logs `line` once per run, however many parts ask (a fallback each part meets alike). */
  note(line: string): void;
  /** Deletes the worktree; safe to call more than once. */
  remove(): void;
}

/** The repository root (bench/dist/baseline.js → ../../). */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function git(args: string[], cwd = ROOT): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The package entry an ESM app gets: `exports["."].import`, else `main`. */
function packageEntry(dir: string): string {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    main?: string;
    exports?: Record<string, unknown>;
  };
  const dot = pkg.exports?.['.'] as
    string | { import?: string | { default?: string }; default?: string } | undefined;
  const imported = typeof dot === 'object' ? dot.import : dot;
  const entry =
    (typeof imported === 'object' ? imported.default : imported) ??
    (typeof dot === 'object' ? dot.default : undefined) ??
    pkg.main ??
    'index.js';
  return join(dir, entry);
}

/**
 * Checks out and builds `ref`, loads its package. Throws (after removing the worktree) when
 * the ref is unknown or does not build.
 */
export async function prepareBaseline(ref: string, log: (line: string) => void): Promise<Baseline> {
  let commit: string;
  try {
    commit = git(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]).trim();
  } catch {
    throw new Error(`BENCH_BASELINE=${ref} names no commit of this repository`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'nrl-bench-base-'));
  const link = join(dir, 'node_modules');
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    process.off('exit', remove);
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    // The link first, so that nothing below can reach the root's node_modules through it.
    try {
      unlinkSync(link);
    } catch {
      // not made yet
    }
    try {
      git(['worktree', 'remove', '--force', dir]);
    } catch {
      // not added yet, or already gone: the directory below, then git's record of it
    }
    rmSync(dir, { recursive: true, force: true });
    try {
      git(['worktree', 'prune']);
    } catch {
      // nothing to prune
    }
  };
  const interrupted = (signal: NodeJS.Signals) => {
    remove();
    process.kill(process.pid, signal);
  };
  process.once('exit', remove);
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    log(`baseline: ${ref} is ${commit.slice(0, 12)}; worktree in ${dir}`);
    git(['worktree', 'add', '--detach', dir, commit]);
    let lockDiffers = true;
    try {
      lockDiffers =
        git(['show', `${commit}:package-lock.json`]) !==
        readFileSync(join(ROOT, 'package-lock.json'), 'utf8');
    } catch {
      // no lock at that ref: differs
    }
    if (lockDiffers) {
      log(
        `baseline: ${ref}'s package-lock.json differs from the current one; it runs on the current node_modules anyway`,
      );
    }
    symlinkSync(join(ROOT, 'node_modules'), link, 'dir');
    const began = Date.now();
    const build = join(dir, 'scripts', 'build.mjs');
    if (existsSync(build)) {
      execFileSync(process.execPath, [build], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
    } else {
      execFileSync('npm', ['run', 'build'], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
    }
    const entry = packageEntry(dir);
    log(
      `baseline: built in ${((Date.now() - began) / 1000).toFixed(0)} s; @base variants load ${entry}`,
    );
    const pkg = (await import(pathToFileURL(entry).href)) as NrlPackage;
    const noted = new Set<string>();
    const note = (line: string) => {
      if (noted.has(line)) return;
      noted.add(line);
      log(line);
    };
    return {
      ref,
      commit,
      dir,
      entry,
      pkg,
      consumeScript: await consumeScript(entry),
      lockDiffers,
      note,
      remove,
    };
  } catch (error) {
    remove();
    throw error;
  }
}

/**
 * Where the consume script is, below a build's entry: core/stores/redis/lua/consume.js, or
 * core/stores/redis-script.js in builds before the stores had a folder each.
 */
const SCRIPT_FILES = [
  join('core', 'stores', 'redis', 'lua', 'consume.js'),
  join('core', 'stores', 'redis-script.js'),
];

/**
 * The consume script of the build whose entry is `entry`: an internal file, looked for where
 * the current build has it (dist/cjs/, beside the ESM entry's dist/esm/), then beside the
 * entry itself (a build of one folder, as older ones were).
 */
export async function consumeScript(entry: string): Promise<string | undefined> {
  const near = dirname(entry);
  const places = [join(dirname(near), 'cjs'), near];
  for (const file of places.flatMap((place) => SCRIPT_FILES.map((name) => join(place, name)))) {
    if (!existsSync(file)) continue;
    try {
      const script = ((await import(pathToFileURL(file).href)) as { CONSUME_SCRIPT?: unknown })
        .CONSUME_SCRIPT;
      if (typeof script === 'string') return script;
    } catch {
      // not a module this process can load: the next place, or none
    }
  }
  return undefined;
}
