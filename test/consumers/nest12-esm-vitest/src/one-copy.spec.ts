import { createRequire } from 'node:module';
import {
  RateLimitGuard,
  RateLimitModule,
  RateLimitService,
} from 'nest-rate-limit';

// An ES module app can reach the package both ways: its own imports, and a CommonJS
// dependency that requires it. Nest tells providers apart by class identity, so both must
// give the same classes: one copy of the package per process.
describe('nest-rate-limit loaded by import and by require', () => {
  const require = createRequire(import.meta.url);

  it('is one copy: require() and import() give the same classes', async () => {
    const required =
      require('nest-rate-limit') as typeof import('nest-rate-limit');
    const imported = await import('nest-rate-limit');

    expect(required.RateLimitModule).toBe(imported.RateLimitModule);
    expect(required.RateLimitGuard).toBe(imported.RateLimitGuard);
    expect(required.RateLimitService).toBe(imported.RateLimitService);
    expect(imported.RateLimitModule).toBe(RateLimitModule);
    expect(required.RateLimitGuard).toBe(RateLimitGuard);
    expect(required.RateLimitService).toBe(RateLimitService);
  });

  it('resolves require to the CommonJS build and import to the ES module entry', () => {
    expect(require.resolve('nest-rate-limit')).toMatch(
      /[/\\]dist[/\\]cjs[/\\]index\.js$/,
    );
    expect(import.meta.resolve('nest-rate-limit')).toMatch(
      /\/dist\/esm\/index\.js$/,
    );
  });
});
