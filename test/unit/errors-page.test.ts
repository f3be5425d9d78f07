/**
 * Every code, warning and log event of lib/ has a heading in docs/reference/errors.md, and
 * every message names its heading: the sources are read with the compiler, so a code added in
 * lib/ without its heading fails here.
 */
import { describe, expect, it, jest } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import ts from 'typescript';
import {
  MemoryStore,
  RATE_LIMIT_EVENTS,
  RateLimitConfigError,
  RateLimiter,
} from '../../lib/index.js';
import { parseRate } from '../../lib/core/model/rate.js';
import { CLIENT_OPTION_CODE } from '../../lib/client/option-error.js';
import { createRateLimitedFetch } from '../../lib/client/index.js';
import { errorsAnchor, seeErrorsPage } from '../../lib/core/errors-page.js';
import { warnIfReplaying } from '../../lib/core/stores/redis/scripting.js';

const root = new URL('../../', import.meta.url);
const page = readFileSync(new URL('docs/reference/errors.md', root), 'utf8');

/** The page's headings, as written (`ERR_RATE_LIMIT_OPTION`, `rate_limit.blocked`). */
const headings = [...page.matchAll(/^#{2,3} (.+)$/gm)].map((m) => m[1]!.trim());

/** Every .ts file under lib/, parsed. */
function libSources(dir = 'lib/'): ts.SourceFile[] {
  return readdirSync(new URL(dir, root), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}${entry.name}`;
    if (entry.isDirectory()) return libSources(`${path}/`);
    if (!entry.name.endsWith('.ts')) return [];
    const text = readFileSync(new URL(path, root), 'utf8');
    return [ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true)];
  });
}

const sources = libSources();

/** The string literals of lib/ (code, not comments) matching `pattern`, with their files. */
function literals(pattern: RegExp): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const source of sources) {
    const visit = (node: ts.Node): void => {
      if (
        (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) &&
        pattern.test(node.text)
      ) {
        found.set(node.text, [...(found.get(node.text) ?? []), source.fileName]);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** The calls in lib/ whose callee's text is `callee` (e.g. `process.emitWarning`). */
function calls(callee: string): { file: string; text: string }[] {
  const found: { file: string; text: string }[] = [];
  for (const source of sources) {
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node) && node.expression.getText(source) === callee) {
        found.push({ file: source.fileName, text: node.getText(source) });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** The members of the `RateLimitErrorCode` union in lib/core/errors.ts. */
function declaredCodes(): string[] {
  const source = sources.find((s) => s.fileName === 'lib/core/errors.ts')!;
  const alias = source.statements.find(
    (s): s is ts.TypeAliasDeclaration =>
      ts.isTypeAliasDeclaration(s) && s.name.text === 'RateLimitErrorCode',
  )!;
  return (alias.type as ts.UnionTypeNode).types.map(
    (t) => ((t as ts.LiteralTypeNode).literal as ts.StringLiteral).text,
  );
}

describe('docs/reference/errors.md has a heading for everything lib/ reports', () => {
  it('every ERR_RATE_LIMIT_ code used in lib/ is a declared code with a heading', () => {
    const used = literals(/^ERR_RATE_LIMIT_[A-Z_]+$/);
    // RateLimitConfigError's codes, and the client's, which is a RangeError's.
    const declared = [...declaredCodes(), CLIENT_OPTION_CODE];
    expect(declared.length).toBeGreaterThan(10);
    for (const [code, files] of used) {
      expect({ code, files, declared: declared.includes(code) }).toEqual({
        code,
        files,
        declared: true,
      });
    }
    for (const code of declared) expect(headings).toContain(code);
    // No heading for a code that no longer exists.
    expect(headings.filter((h) => h.startsWith('ERR_RATE_LIMIT_')).sort()).toEqual(
      [...declared].sort(),
    );
  });

  it('every code declared is thrown somewhere in lib/', () => {
    const used = literals(/^ERR_RATE_LIMIT_[A-Z_]+$/);
    const unused = declaredCodes().filter((code) => (used.get(code) ?? []).length < 2);
    // Each appears in the union and at least once where it is thrown.
    expect(unused).toEqual([]);
  });

  it('every warning code and every log event has a heading', () => {
    const warnings = [...literals(/^NRL_[A-Z_]+$/).keys()];
    expect(warnings).toEqual(['NRL_UNSAFE_REDIS_CLIENT']);
    for (const code of warnings) expect(headings).toContain(code);
    for (const event of Object.values(RATE_LIMIT_EVENTS)) expect(headings).toContain(event);
    // The operators' audit lines too, which are not in RATE_LIMIT_EVENTS.
    const events = [...literals(/^rate_limit\.[a-z_]+$/).keys()];
    expect(events).toEqual(expect.arrayContaining(['rate_limit.override_set']));
    expect(events.filter((event) => !headings.includes(event))).toEqual([]);
  });

  it('every link to a heading of the page names one that exists', () => {
    const anchors = new Set(headings.map(errorsAnchor));
    const links = [...page.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]!);
    expect(links.length).toBeGreaterThan(10);
    expect(links.filter((anchor) => !anchors.has(anchor))).toEqual([]);
  });

  it('the page ships in the npm package', () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
      files: string[];
    };
    expect(pkg.files).toContain('docs');
  });

  it('anchors are GitHub heading anchors: lower case, dots dropped', () => {
    expect(errorsAnchor('ERR_RATE_LIMIT_OPTION')).toBe('err_rate_limit_option');
    expect(errorsAnchor('rate_limit.backend_error')).toBe('rate_limitbackend_error');
    expect(errorsAnchor('NRL_UNSAFE_REDIS_CLIENT')).toBe('nrl_unsafe_redis_client');
    expect(errorsAnchor('Log events')).toBe('log-events');
  });
});

describe('every message ends with the link to its heading', () => {
  it.each(declaredCodes())('a RateLimitConfigError %s', (code) => {
    const error = new RateLimitConfigError(code as never, 'invalid x 1', 'Place.where');
    expect(error.message).toBe(
      `invalid x 1 (in Place.where) [${code}] (see docs/reference/errors.md#${code.toLowerCase()} in the nest-rate-limit package)`,
    );
    expect(error.detail).toBe('invalid x 1');
  });

  it('as thrown by lib/: a bad rate, a bad store option, a store without inspect', async () => {
    const thrown = (f: () => unknown): RateLimitConfigError => {
      try {
        f();
      } catch (error) {
        return error as RateLimitConfigError;
      }
      throw new Error('did not throw');
    };
    expect(thrown(() => parseRate('100/x')).message).toMatch(
      /\[ERR_RATE_LIMIT_RATE\] \(see docs\/reference\/errors\.md#err_rate_limit_rate in the nest-rate-limit package\)$/,
    );
    const store = thrown(() => new MemoryStore({ maxKeys: 0 }));
    expect(store.code).toBe('ERR_RATE_LIMIT_STORE_OPTION');
    expect(store.message).toBe(
      'invalid MemoryStore option maxKeys: 0 (in MemoryStore) [ERR_RATE_LIMIT_STORE_OPTION] ' +
        '(see docs/reference/errors.md#err_rate_limit_store_option in the nest-rate-limit package)',
    );
    const memory = new MemoryStore();
    // A store of the user's own, with no `inspect`.
    const limiter = new RateLimiter({
      store: {
        consume: (policies) => memory.consume(policies),
        deleteByPrefix: (prefix) => memory.deleteByPrefix(prefix),
        close: () => memory.close(),
      },
    });
    const inspect = await limiter.inspect('user:1').then(
      () => undefined,
      (error: unknown) => error as RateLimitConfigError,
    );
    expect(inspect?.code).toBe('ERR_RATE_LIMIT_STORE_UNSUPPORTED');
    expect(inspect?.message).toContain(seeErrorsPage('ERR_RATE_LIMIT_STORE_UNSUPPORTED'));
    limiter.close();
    await memory.close();
  });

  it('a bad option of nest-rate-limit/client: a RangeError with its code and link', () => {
    const thrown: unknown[] = [];
    for (const create of [
      () => createRateLimitedFetch({ maxAttempts: 0 }),
      () => createRateLimitedFetch({ maxWaitMs: NaN }),
      () => createRateLimitedFetch({ pacing: { lowWater: -1 } }),
    ]) {
      try {
        create();
      } catch (error) {
        thrown.push(error);
      }
    }
    expect(thrown.map((e) => [e instanceof RangeError, (e as RangeError).message])).toEqual(
      [
        'maxAttempts must be an integer >= 1, got 0',
        'maxWaitMs must be a number >= 0, got NaN',
        'pacing.lowWater must be an integer >= 0, got -1',
      ].map((detail) => [
        true,
        `rate-limit client: ${detail} [ERR_RATE_LIMIT_CLIENT_OPTION] ${seeErrorsPage(CLIENT_OPTION_CODE)}`,
      ]),
    );
    expect(thrown.map((e) => (e as { code?: string }).code)).toEqual(
      Array(3).fill('ERR_RATE_LIMIT_CLIENT_OPTION'),
    );
  });

  it('every warning logged by lib/ names its heading', () => {
    const sites = [
      ...calls('this.logger.warn'),
      ...calls('logger.warn'),
      ...calls('this.logger().warn'),
    ];
    expect(sites.length).toBeGreaterThan(5);
    // Lines that do not build their link in the call itself, and why.
    const allowed: [file: string, text: string][] = [
      // Event lines whose fields, built just before, end with `docs` (see events.test.ts).
      ['lib/nest/observability/events.ts', '${event} ${JSON.stringify(fields)}'],
      [
        'lib/nest/observability/events.ts',
        '${RATE_LIMIT_EVENTS.unenforced} ${JSON.stringify(fields)}',
      ],
      [
        'lib/nest/module/redis-connection.ts',
        'rate_limit.redis_unreachable ${JSON.stringify(fields)}',
      ],
      // rate_limit.blocked and shadow_blocked: written under normal traffic, kept short.
      ['lib/nest/observability/events.ts', '${event} ${JSON.stringify({ ...fields, count'],
      // The @nestjs/throttler drop-in keeps the throttler's own message.
      ['lib/throttler/guard.ts', 'No throttlers are configured'],
    ];
    const unlinked = sites.filter((site) => !/seeErrorsPage\(|errorsLink\(/.test(site.text));
    const unexplained = unlinked.filter(
      (site) => !allowed.some(([file, text]) => site.file === file && site.text.includes(text)),
    );
    expect(unexplained.map((site) => `${site.file}: ${site.text}`)).toEqual([]);
    expect(unlinked).toHaveLength(allowed.length);
  });

  it('every process warning of lib/ ends with its link', () => {
    const sites = calls('process.emitWarning');
    expect(sites.map((s) => s.file)).toEqual(['lib/core/stores/redis/scripting.ts']);
    for (const site of sites) expect(site.text).toContain('seeErrorsPage(');
  });

  it('NRL_UNSAFE_REDIS_CLIENT, emitted for a client with ioredis defaults', () => {
    // A real client, never connected (lazyConnect): the warning reads its options only. The
    // spy records the call and prints nothing (a warning this test means to cause is no noise
    // in `npm test`); Jest's sandboxed process does not see the real one's 'warning' events.
    const client = new Redis({ lazyConnect: true });
    const emitted = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      warnIfReplaying(client);
      warnIfReplaying(client);
    } finally {
      client.disconnect();
    }
    const calls = emitted.mock.calls.map((args) => args as unknown as [string, { code: string }]);
    emitted.mockRestore();
    // Once per client.
    expect(calls).toHaveLength(1);
    const [message, options] = calls[0]!;
    expect(options).toEqual({ code: 'NRL_UNSAFE_REDIS_CLIENT' });
    expect(message).toBe(
      'this Redis client may send a rate-limit script twice and count one request twice; ' +
        'set autoResendUnfulfilledCommands: false ' +
        '(see docs/reference/errors.md#nrl_unsafe_redis_client in the nest-rate-limit package)',
    );
  });
});
