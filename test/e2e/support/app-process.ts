/**
 * A Nest app in an OS process of its own (a script started with `node --import tsx/esm`,
 * given its options as JSON in argv, that prints `listening <url>` and serves until its stdin
 * closes): for tests whose claims need several processes, or a process that the test's own
 * work cannot stall.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { request, type Reply } from './app.js';

export class AppProcess {
  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    /** `http://127.0.0.1:<port>` */
    readonly url: string,
    private readonly printed: () => string,
  ) {}

  /** Everything it printed on stdout so far. */
  get output(): string {
    return this.printed();
  }

  /** Resolves once its stdout holds a line matching `pattern`; rejects after `ms`. */
  async printedLine(pattern: RegExp, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no line matching ${pattern} in ${ms} ms`)), ms);
    });
    try {
      while (!pattern.test(this.printed())) {
        await Promise.race([once(this.child.stdout, 'data'), late]);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Starts `script` with `options`; rejects with its stderr if it exits first. */
  static async start(script: string, options: unknown): Promise<AppProcess> {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx/esm', script, JSON.stringify(options)],
      {
        env: process.env,
      },
    );
    let out = '';
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const line = /^listening (\S+)$/m.exec(out);
        if (line) resolve(line[1]!);
      });
      child.once('exit', (code) => reject(new Error(`${script} exited ${code}: ${err}`)));
    });
    return new AppProcess(child, url, () => out);
  }

  /** GET on a path of this app, body read. */
  get(path: string, headers: Record<string, string> = {}): Promise<Reply> {
    return request(`${this.url}${path}`, headers);
  }

  /** Closes its stdin (a clean shutdown) or SIGKILLs it (a crash: no goodbye to anyone). */
  async stop(crash = false): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = once(this.child, 'exit');
    if (crash) this.child.kill('SIGKILL');
    else this.child.stdin.end();
    await exited;
  }
}
