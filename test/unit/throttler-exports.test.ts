/**
 * nest-rate-limit/throttler exports every name @nestjs/throttler 6.7 exports (types and
 * values), so that changing the import path is enough, whatever an app imports.
 */
import { describe, expect, it } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../', import.meta.url));

function exportsOf(files: string[]): Set<string>[] {
  const program = ts.createProgram(
    files.map((f) => root + f),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      experimentalDecorators: true,
      skipLibCheck: true,
      noEmit: true,
    },
  );
  const checker = program.getTypeChecker();
  return files.map((f) => {
    const module = checker.getSymbolAtLocation(program.getSourceFile(root + f)!)!;
    return new Set(checker.getExportsOfModule(module).map((s) => s.name));
  });
}

describe('nest-rate-limit/throttler', () => {
  it('exports every name @nestjs/throttler exports', () => {
    const [theirs, ours] = exportsOf([
      'node_modules/@nestjs/throttler/dist/index.d.ts',
      'lib/throttler/index.ts',
    ]);
    expect(theirs!.size).toBeGreaterThan(20);
    expect([...theirs!].filter((name) => !ours!.has(name))).toEqual([]);
  });
});

describe('RateLimitRedisStorage', () => {
  // A fresh user's tryout: `new RateLimitRedisStorage(process.env.REDIS_URL!)` with the
  // variable unset stopped the app at bootstrap with "Cannot read properties of undefined
  // (reading 'evalsha')".
  it.each([undefined, null, '', 42])('refuses %p at once, naming the option', async (redis) => {
    const { RateLimitRedisStorage } = await import('../../lib/throttler/index.js');
    expect(() => new RateLimitRedisStorage(redis as never)).toThrow(
      /invalid redis .*: expected a Redis URL, ioredis options, or a Redis or Cluster client/,
    );
  });
});
